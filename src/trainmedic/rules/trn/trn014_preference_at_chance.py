"""TRN014 `preference-at-chance`: a DPO-family loss sits at its chance value for the whole run.

Collector: `trainmedic.llm.preference`, on TRL's `DPOTrainer` (under `trainmedic run` and
`trainmedic.hf.Guard`). It sends, once per trainer, its setup (`SETUP_OBSERVATION`: `beta`, the
loss types and their weights, `label_smoothing`, WPO weighting, and what the reference model
is: a separate model, one sharing the policy's parameters, the policy with its adapters
disabled, log-probabilities computed before training, a copy synchronised into the policy);
at every log, the metrics TRL computes anyway (`LOG_OBSERVATION`: `loss`, `rewards/margins`,
`rewards/chosen`, `rewards/rejected`, `rewards/accuracies`); and on checked steps, the pairs
of the batches it built whose chosen and rejected token ids are the same (`PAIRS_OBSERVATION`).

The chance value is the loss at zero margin, read from TRL's loss code (`DPOTrainer._compute_loss`,
trl 1.16) where the margin `beta x (chosen log-ratio - rejected log-ratio)` is 0:
`sigmoid`, `robust`, `aot`, `aot_unpaired`, `sigmoid_norm`: -log sigmoid(0) = ln 2;
`hinge`: relu(1 - 0) = 1; `ipo`: (0 - 1/(2 beta))^2 = 1/(4 beta^2); `apo_zero`:
1 - sigmoid(x) + sigmoid(x) = 1; `discopop`: (ln 2 + 1)/2; `exo_pair`: -ln 2 - ln(eps(1-eps))/2
with eps = `label_smoothing`. Several loss types add up, weighted. The others (`nca_pair`,
`bco_pair`, `sppo_hard`, `apo_down`, `sft`) and WPO weighting have no single value at zero
margin: the run is not judged.

Why these thresholds, on general grounds:

- A DPO run starts exactly at chance: at step 0 the policy is the reference, every log-ratio
  is 0. A healthy run leaves it with its first updates (the margins grow from the second
  step on), so only a run whose every logged point sits at chance is judged, and at least
  `MIN_POINTS` (5) of them: TRL logs every 10 steps by default, so 50 steps at least, and
  each point is itself a mean over its steps.
- At chance: each point's mean margin in log-ratio units, |`rewards/margins`| / `beta`,
  is at most `LOGRATIO_TOL` (0.01 nats): the policy's odds of the chosen against the rejected
  response moved by at most 1 % against the reference's over the whole run, and the loss is
  within `LOSS_REL` (0.5 %) of the chance value. The causes give 0 up to float rounding (the
  same token ids scored twice, a reference that is the policy, `beta` 0 making every
  reward 0). With `beta` 0 the rewards are 0 by construction: the loss alone is judged.
- A cause is named when measured: `beta` 0 from the trainer's arguments; a reference model
  that shares the policy's parameters, or is overwritten with it after every step
  (`sync_ref_model` with `ref_model_mixup_alpha` 1 and `ref_model_sync_steps` 1); identical
  pairs when at least `IDENTICAL_SHARE` (90 %) of the pairs on checked batches have the same
  chosen and rejected ids (a run with a minority of them still learns from the others).
  Without a measured cause, rewards of both sides at 0 on every point (|reward| / `beta`
  within `LOGRATIO_TOL`) say that the policy scores every response as the reference does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from trainmedic.events import Event, GuardObservation
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord

#: The trainer's setup, once per trainer.
SETUP_OBSERVATION = "preference_setup"
#: The metrics TRL logs, at every log.
LOG_OBSERVATION = "preference_log"
#: The pairs of the checked batches (shared with DAT018 and DAT020 from the guard).
PAIRS_OBSERVATION = "preference_pairs"

MIN_POINTS = 5
LOGRATIO_TOL = 0.01
LOSS_REL = 0.005
IDENTICAL_SHARE = 0.9

#: The reference model, as the collector names it.
SEPARATE, SHARED, SYNCED, ADAPTERS, PRECOMPUTED = (
    "separate",
    "shares_parameters",
    "synced",
    "adapters",
    "precomputed",
)

_LN2 = math.log(2)


def chance_level(setup: Mapping[str, Any]) -> float | None:
    """The loss at zero margin for the setup's loss types and weights (module docstring);
    None when one of them has no single value there."""
    beta = float(setup.get("beta", 0.1))
    smoothing = float(setup.get("label_smoothing", 0.0))
    types = list(setup.get("loss_type") or ["sigmoid"])
    weights = list(setup.get("loss_weights") or [1.0] * len(types))
    if setup.get("use_weighting") or len(weights) != len(types):
        return None
    total = 0.0
    for loss_type, weight in zip(types, weights, strict=True):
        if loss_type in {"sigmoid", "robust", "aot", "aot_unpaired", "sigmoid_norm"}:
            value = _LN2
        elif loss_type in {"hinge", "apo_zero"}:
            value = 1.0
        elif loss_type == "discopop":
            value = (_LN2 + 1.0) / 2
        elif loss_type == "ipo" and beta > 0:
            value = 1.0 / (4 * beta * beta)
        elif loss_type == "exo_pair" and 0 < smoothing < 1:
            value = -_LN2 - 0.5 * math.log(smoothing * (1 - smoothing))
        else:
            return None
        total += float(weight) * value
    return total


def _example() -> list[Event]:
    """DPOTrainer with beta 0.1 on pairs whose chosen equals rejected: loss 0.6931 and margins
    0 at every log of 100 steps; the checked batches hold 64 pairs, all identical."""
    events: list[Event] = [
        GuardObservation(
            t=0.0, pid=100, check=SETUP_OBSERVATION, step=1,
            data={"trainer": "DPOTrainer", "beta": 0.1, "loss_type": ["sigmoid"], "reference": SEPARATE},
        )
    ]  # fmt: skip
    for step in range(10, 101, 10):
        data = {"loss": 0.6931, "margins": 0.0, "chosen": 0.0003, "rejected": 0.0003, "accuracies": 0.0}
        events.append(GuardObservation(t=float(step), pid=100, check=LOG_OBSERVATION, data=data, step=step))
    pairs = {"pairs": 64, "identical": 64, "identical_steps": [1, 2, 3, 4, 5, 6, 7, 8], "batches": 8}
    events.append(GuardObservation(t=9.0, pid=100, check=PAIRS_OBSERVATION, data=pairs, step=8))
    return events


SPEC = FindingSpec(
    code="TRN014",
    slug="preference-at-chance",
    severity=Severity.ERROR,
    title="The preference loss stays at chance",
    what=(
        "A preference loss of the DPO family stays at its chance value (ln 2 = 0.6931 for DPO's "
        "sigmoid loss; 1 for hinge, 1/(4 beta^2) for IPO) with the reward margins at 0 on every "
        "logged point of the run (at least 5): nothing separates the chosen responses from the "
        "rejected ones. The cause is named where measured: identical chosen and rejected pairs, "
        "`beta` 0, or a reference model that is the policy itself."
    ),
    why=(
        "DPO trains on the difference between the policy's log-probability ratios (against the "
        "reference model) of the chosen and of the rejected response, scaled by `beta`. When the "
        "two responses are the same, when `beta` is 0, or when the reference is the policy, that "
        "difference is 0 whatever the weights: the loss is exactly its value at zero margin, the "
        "gradient through it is 0, and the run spends its compute without learning a preference. "
        "Every DPO run starts there (the policy is its own reference at step 0); a healthy one "
        "leaves within its first steps. Nothing fails: TRL logs loss 0.6931, rewards/margins 0.0 "
        "and rewards/accuracies 0.0 (a tie is no win) at every log."
    ),
    example=(
        "DPOTrainer on a data set where a join wrote the chosen answer into `rejected`:\n"
        "  trainmedic run -- python dpo.py\n"
        "  ERROR TRN014 preference-at-chance: The DPO loss stayed at chance for the whole run: "
        "0.6931 (ln 2 = 0.6931 for loss_type sigmoid) and rewards/margins 0 at all 10 logged "
        "points (steps 10-100). Cause: the chosen and rejected responses are identical in 64 of "
        "64 pairs of the checked batches (100.0%)"
    ),
    fix=(
        "Give DPOTrainer pairs that differ (drop rows where chosen == rejected), a `beta` above 0 "
        "(DPOConfig(beta=0.1) is TRL's default), and a reference model that is a frozen copy of "
        "the starting policy: leave `ref_model=None` so TRL loads one (or disables the adapters "
        "of a PEFT model), never a model that shares the policy's parameters."
    ),
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def preference_at_chance(record: RunRecord) -> list[Finding]:
    """TRN014: every logged point of a DPO-family run sits at the loss's chance value with
    margins at 0."""
    observations = record.guard_observations
    rank = _first_rank(observations)
    mine = [o for o in observations if o.rank == rank]
    points = [o for o in mine if o.check == LOG_OBSERVATION and _number(o.data.get("loss")) is not None]
    if len(points) < MIN_POINTS:
        return []
    setups = [o.data for o in mine if o.check == SETUP_OBSERVATION]
    setup: Mapping[str, Any] = setups[-1] if setups else {}
    chance = chance_level(setup)
    if chance is None:
        return []
    beta = float(setup.get("beta", 0.1))
    losses = [float(o.data["loss"]) for o in points]
    margins = [_number(o.data.get("margins")) for o in points]
    if any(abs(loss - chance) > LOSS_REL * chance for loss in losses):
        return []
    if beta > 0 and any(m is None or abs(m) / beta > LOGRATIO_TOL for m in margins):
        return []
    pairs = [o.data for o in mine if o.check == PAIRS_OBSERVATION]
    cause, fix, cause_evidence = _cause(setup, pairs[-1] if pairs else {}, points, beta)
    steps = [int(o.step) for o in points if o.step is not None]
    span = f"steps {steps[0]}-{steps[-1]}" if steps else "every log"
    types = "+".join(str(t) for t in setup.get("loss_type") or ["sigmoid"])
    named = f"ln 2 = {chance:.4f}" if math.isclose(chance, _LN2) else f"{chance:.4g}"
    message = (
        f"The {setup.get('trainer', 'DPO')} loss stayed at chance for the whole run: "
        f"{_median(losses):.4f} ({named} for loss_type {types}, beta {beta:g}) and "
        f"rewards/margins {_median([m or 0.0 for m in margins]):.2g} at all {len(points)} logged "
        f"points ({span}). {cause}"
    )
    evidence: dict[str, object] = {
        "framework": "trl",
        "trainer": setup.get("trainer", "DPOTrainer"),
        "loss_type": list(setup.get("loss_type") or ["sigmoid"]),
        "beta": beta,
        "chance_level": chance,
        "points": len(points),
        "first_step": steps[0] if steps else None,
        "last_step": steps[-1] if steps else None,
        "losses": losses[:20],
        "margins": margins[:20],
        "accuracies": [_number(o.data.get("accuracies")) for o in points][:20],
        **cause_evidence,
    }
    return [SPEC.finding(message, evidence=evidence, fix=fix, step=steps[-1] if steps else None, rank=rank)]


RULES: tuple[Rule, ...] = (preference_at_chance,)


def _cause(
    setup: Mapping[str, Any], pairs: Mapping[str, Any], points: Sequence[GuardObservation], beta: float
) -> tuple[str, str | None, dict[str, object]]:
    """The measured cause: its sentence, its fix (None: the spec's) and its evidence."""
    checked, identical = int(pairs.get("pairs", 0)), int(pairs.get("identical", 0))
    share = identical / checked if checked else 0.0
    reference = setup.get("reference")
    if beta == 0:
        return (
            "Cause: beta is 0 (DPOConfig(beta=0.0)): every reward is beta x log-ratio = 0, so the "
            "loss is its zero-margin value and its gradient is 0 whatever the pairs",
            "Set `beta` above 0 in DPOConfig (TRL's default is 0.1; 0.01-0.5 is the usual range).",
            {"cause": "beta_zero"},
        )
    if reference == SHARED:
        return (
            f"Cause: the reference model shares {setup.get('shared_parameters')} of its "
            f"{setup.get('reference_parameters')} parameter tensors with the policy (a shallow copy "
            "or a view of the model passed as `ref_model`): it is the policy itself, so every "
            "log-ratio is 0",
            "Pass `ref_model=None` (TRL then loads a frozen copy of the model, or disables the "
            "adapters of a PEFT model), or a separately loaded model "
            "(AutoModelForCausalLM.from_pretrained(...)), never a copy that shares the policy's tensors.",
            {"cause": "reference_is_policy", "shared_parameters": setup.get("shared_parameters")},
        )
    if reference == SYNCED:
        return (
            "Cause: the reference model is overwritten with the policy after every step "
            f"(sync_ref_model=True, ref_model_mixup_alpha={setup.get('ref_model_mixup_alpha')}, "
            f"ref_model_sync_steps={setup.get('ref_model_sync_steps')}): it is the policy itself, "
            "so every log-ratio is 0",
            "Keep the reference fixed (sync_ref_model=False, TRL's default) or sync it rarely and "
            "partly, as TR-DPO does (ref_model_sync_steps in the hundreds, ref_model_mixup_alpha < 1).",
            {"cause": "reference_is_policy", "ref_model_mixup_alpha": setup.get("ref_model_mixup_alpha")},
        )
    if checked and share >= IDENTICAL_SHARE:
        return (
            f"Cause: the chosen and rejected responses are identical in {identical:,} of {checked:,} "
            f"pairs of the checked batches ({share:.1%}): the same token ids score the same, so "
            "every margin is 0",
            None,
            {"cause": "identical_pairs", "pairs_checked": checked, "identical_pairs": identical},
        )
    rewards = [(_number(o.data.get("chosen")), _number(o.data.get("rejected"))) for o in points]
    if all(
        c is not None and r is not None and max(abs(c), abs(r)) / beta <= LOGRATIO_TOL for c, r in rewards
    ):
        return (
            "The rewards of both sides are 0 too: the policy scores every response as the reference "
            "does (a reference that is the policy, or a policy whose weights do not change: "
            "check the learning rate and which parameters train)",
            None,
            {
                "cause": "unknown",
                "rewards_zero": True,
                "pairs_checked": checked,
                "identical_pairs": identical,
            },
        )
    return (
        "The chosen and rejected responses are scored alike while the policy moves away from the "
        "reference: check that the pairs differ where the data is built",
        None,
        {"cause": "unknown", "pairs_checked": checked, "identical_pairs": identical},
    )


def _first_rank(observations: Sequence[GuardObservation]) -> int | None:
    ranks = {o.rank for o in observations if o.check == LOG_OBSERVATION}
    known = sorted(r for r in ranks if r is not None)
    return known[0] if known else None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else float("nan")
