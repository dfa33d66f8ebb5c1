"""TRN016 `kl-negative`: the logged KL between the policy and the reference is negative beyond noise.

Collector: the HF guard copies each training log of TRL's `GRPOTrainer` and `RLOOTrainer`
(`rules/_helpers/rl.py`); this rule reads its `kl`, which TRL logs only when `beta` != 0.

What TRL 1.16 computes, and when a negative mean is possible:

- `GRPOTrainer` logs the mean over completion tokens of Schulman's k3 estimator,
  exp(r) - r - 1 with r = log pi_ref - log pi (times the importance ratio, > 0, under
  `use_bias_correction_kl`). It is >= 0 for every token by construction (e^r >= 1 + r):
  GRPO's logged `kl` cannot be negative, whatever the inputs. Only float rounding can give
  a value a few 1e-8 under 0, which `FLOOR` ignores. A GRPO reference that scores
  different inputs shows as a KL that is large from the first step, not a negative one.
- `RLOOTrainer` (its `beta` defaults to 0.05) logs the mean of the first-order estimator
  k1 = log pi_old - log pi_ref over completion tokens. Sampled from the policy it scores,
  k1's expectation is KL(pi || pi_ref) >= 0, and at the first step (policy = reference) it
  is exactly 0. A mean that stays negative means the two log-probabilities are not of the
  same thing: the reference scores other inputs (another tokenizer, template or padding
  side), is another model than the starting policy (RLOO reloads the reference from the
  model's `name_or_path`, not from the object passed), or the completions were not sampled
  from the policy that is scored.

Why these thresholds, on general grounds: each log's k1 is a sample mean, negative by
chance when the true KL is small. The rule asks for the sign to hold (`NEGATIVE_SHARE`,
3/4 of the logs, at least `MIN_LOGS` = 4), for the mean over the logs to be below 0 by more
than `NOISE_SE` (2) standard errors of the logs' own spread, and to be larger in size than
`FLOOR` (1e-4 nats a token, far above float32 rounding of log-probabilities).
"""

from __future__ import annotations

import math

from trainmedic.events import Event, GuardObservation
from trainmedic.findings import Finding, FindingSpec, Severity, epoch_number
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers import rl

NEGATIVE_SHARE = 0.75
MIN_LOGS = 4
NOISE_SE = 2.0
FLOOR = 1e-4


def _example() -> list[Event]:
    """RLOO whose reference scores the completions under another chat template: kl < 0 at every log."""
    rows = [{"kl": -0.4 - 0.05 * (i % 3), "reward": 0.2 + 0.01 * i} for i in range(8)]
    return rl.example_logs(rows, {"trainer": "RLOOTrainer", "beta": 0.05})


SPEC = FindingSpec(
    code="TRN016",
    slug="kl-negative",
    severity=Severity.ERROR,
    title="The KL to the reference model is negative",
    what=(
        "In RL fine-tuning with a KL penalty (TRL's RLOOTrainer, or GRPOTrainer with beta > 0), "
        "the trainer logs an estimate of the KL divergence between the policy and the "
        "reference model. A KL divergence cannot be negative; here its estimate stayed below "
        "0 beyond the noise of the estimator. The KL curve is given."
    ),
    why=(
        "The penalty beta x KL then rewards the policy for moving away from the reference "
        "instead of holding it near, and the reported KL no longer measures the drift. The "
        "policy and the reference do not score the same inputs (a different tokenizer, chat "
        "template or padding_side for the reference), or the reference is not the starting "
        "policy (a model changed in memory before the trainer reloads the reference from its "
        "name_or_path, a reference loaded from another checkpoint), or the completions are not "
        "samples of the policy (generation_kwargs that force or forbid tokens). GRPOTrainer's "
        "estimator "
        "(k3) is >= 0 per token by construction and never shows this; RLOOTrainer's (k1) does."
    ),
    example=(
        "RLOOTrainer given a model changed in memory (the reference is reloaded from the "
        "checkpoint on disk) and generation_kwargs={'min_new_tokens': 8}: the logged kl is "
        "-0.39 at the first log and -0.42 on average over 6 logs."
    ),
    fix=(
        "Make the reference the starting policy: save the model you start from and pass its "
        'path (model="path/to/sft"), so that TRL loads the policy and the reference from the '
        "same weights; sample from the policy itself (no min_new_tokens, bad_words_ids or "
        "suppress_tokens in generation_kwargs); use one tokenizer (processing_class) and chat "
        'template for both, with padding_side="left" for generation.'
    ),
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def kl_negative(record: RunRecord) -> list[Finding]:
    """TRN016: per rank, the logged KL is negative at most logs and on average beyond noise."""
    found: list[Finding] = []
    for rank, reads in sorted(rl.rl_logs(record).items(), key=rl.by_rank_order):
        points = rl.series(reads, "kl")
        if len(points) < MIN_LOGS:
            continue
        values = [v for _, v in points]
        center = rl.mean(values)
        spread = math.sqrt(sum((v - center) ** 2 for v in values) / (len(values) - 1))
        error = spread / math.sqrt(len(values))
        negative = sum(v < 0 for v in values)
        if negative >= NEGATIVE_SHARE * len(values) and center < -FLOOR and center < -NOISE_SE * error:
            found.append(_finding(rank, reads, points, center, error))
    return found


RULES: tuple[Rule, ...] = (kl_negative,)


def _finding(
    rank: int | None,
    reads: list[GuardObservation],
    points: list[tuple[int, float]],
    center: float,
    error: float,
) -> Finding:
    negative = sum(v < 0 for _, v in points)
    trainer = rl.trainer_name(reads)
    message = (
        f"{trainer} logged a negative KL to the reference at {negative} of {len(points)} logs "
        f"(mean {center:.3g} nats a token, {abs(center) / error if error else math.inf:.1f} "
        f"standard errors below 0; first {points[0][1]:.3g} at step {points[0][0]}, last "
        f"{points[-1][1]:.3g} at step {points[-1][0]}): the policy and the reference do not "
        "score the same inputs, or the reference is not the starting policy"
    )
    first = reads[0]
    return SPEC.finding(
        message,
        evidence={
            "kl": [[s, round(v, 5)] for s, v in points[:5] + points[5:][-15:]],
            "negative_logs": negative,
            "logs": len(points),
            "mean_kl": round(center, 6),
            "standard_error": round(error, 6),
            "beta": rl.config(reads, "beta"),
            "trainer": rl.config(reads, "trainer"),
            "thresholds": {"negative_share": NEGATIVE_SHARE, "noise_se": NOISE_SE, "floor": FLOOR},
        },
        rank=rank,
        step=first.step,
        epoch=epoch_number(first.epoch),
    )
