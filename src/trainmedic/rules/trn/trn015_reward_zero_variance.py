"""TRN015 `reward-zero-variance`: most groups of completions get one reward, so there is no signal.

Collector: the HF guard (`trainmedic.hf.Guard`, added to every Trainer under `trainmedic run`)
copies each training log of TRL's `GRPOTrainer` and `RLOOTrainer` into an `rl_metrics`
observation (`rules/_helpers/rl.py`): `frac_reward_zero_std` (the share of prompts whose
`num_generations` completions all got the same reward, computed by TRL at every step),
`reward`, `reward_std`, `rewards/<name>/mean`, `loss` and `grad_norm`.

GRPO's advantage is the reward minus its group's mean (divided by the group's std); RLOO's is
the reward minus the mean of the group's other completions. A group whose rewards are all
equal has advantage 0 for every completion: it adds nothing to the policy gradient. When
nearly all groups are like that for most of the run, the loss and the gradient are (near) 0
and the run trains on nothing while it takes its full time.

Why these thresholds, on general grounds:

- `ZERO_SHARE` (0.9): at 0.9 fewer than one group in ten carries a gradient. For a binary
  reward of success rate p, a group of G completions is uniform with probability
  p^G + (1-p)^G: with G = 8, at most 0.43 for any p in [0.1, 0.9]; even with G = 2 (the
  smallest group) it stays under 0.82 for p in [0.1, 0.9]. A learning run sits well below.
- Judged over the second half of the logs (`LATE_SHARE`): a healthy run on a hard task
  often starts with uniform groups (every completion fails the format) and leaves them as
  it learns; only a run whose groups are still uniform on average over its second half has
  had no signal for most of it. At least `MIN_LOGS` (4) logs are required, of which at
  least 2 in the judged half.
"""

from __future__ import annotations

from trainmedic.events import Event, GuardObservation
from trainmedic.findings import Finding, FindingSpec, Severity, epoch_number
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers import rl

ZERO_SHARE = 0.9
LATE_SHARE = 0.5
MIN_LOGS = 4
#: Below this the logged `reward_std` is 0 up to float rounding: every completion, in every group, scored the same.
SAME_REWARD_STD = 1e-6


def _example() -> list[Event]:
    """A GRPO run whose reward function returns 0.0 for every completion, 8 logs."""
    row = {"reward": 0.0, "reward_std": 0.0, "frac_reward_zero_std": 1.0, "loss": 0.0, "grad_norm": 0.0}
    row["rewards/accuracy_reward/mean"] = 0.0
    return rl.example_logs([row] * 8, {"trainer": "GRPOTrainer", "num_generations": 8})


SPEC = FindingSpec(
    code="TRN015",
    slug="reward-zero-variance",
    severity=Severity.ERROR,
    title="Most groups of completions got the same reward: no learning signal",
    what=(
        "In RL fine-tuning (TRL's GRPOTrainer, RLOOTrainer), the completions of one prompt "
        "are compared with each other: the advantage is a completion's reward minus its "
        "group's mean. Here nearly every group's completions got the same reward over most of "
        "the run, so the advantages, the loss and the gradient were 0. The share of "
        "zero-variance groups (TRL's frac_reward_zero_std) and the reward values are given."
    ),
    why=(
        "Nothing fails: the run logs a loss of 0, a reward that does not move, and takes its "
        "full time. The usual causes are a reward function that returns a constant (always 0: "
        "it parses a format or an answer tag the model never produces, it reads the wrong "
        "column or the completion as a string when TRL passes messages; always 1: a check that "
        "cannot fail), a task too hard or too easy for the model (every completion fails or "
        "succeeds), or completions of a group that are identical (num_generations of 2, a "
        "temperature near 0). A run whose early groups are uniform and that leaves them as it "
        "learns is not reported."
    ),
    example=(
        "GRPOTrainer with a reward function that checks for '<answer>' tags the model never "
        "writes: frac_reward_zero_std 1.0 at every log, reward 0.0, loss 0.0."
    ),
    fix=(
        "Call the reward function on a few real completions and look at the values: make it "
        "read what TRL passes (completions are lists of messages for conversational data) "
        "and give partial credit (a format reward beside the accuracy reward) so that a group "
        "can differ; choose prompts the model sometimes solves; raise num_generations (8-16) "
        "and keep temperature near 1.0 so that a group's completions differ."
    ),
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def reward_zero_variance(record: RunRecord) -> list[Finding]:
    """TRN015: per rank, the second half of the logs has nearly every group at zero reward std."""
    found: list[Finding] = []
    for rank, reads in sorted(rl.rl_logs(record).items(), key=rl.by_rank_order):
        points = rl.series(reads, "frac_reward_zero_std")
        late = points[int(len(points) * (1 - LATE_SHARE)) :]
        if len(points) < MIN_LOGS or len(late) < 2:
            continue
        late_share = rl.mean([v for _, v in late])
        if late_share >= ZERO_SHARE:
            found.append(_finding(rank, reads, points, late_share))
    return found


RULES: tuple[Rule, ...] = (reward_zero_variance,)


def _finding(
    rank: int | None, reads: list[GuardObservation], points: list[tuple[int, float]], late_share: float
) -> Finding:
    rewards = [v for _, v in rl.series(reads, "reward")]
    stds = [v for _, v in rl.series(reads, "reward_std")]
    per_function = {
        key.split("/")[1]: sorted({round(v, 4) for _, v in rl.series(reads, key)})[:5]
        for key in sorted({k for o in reads for k in o.data.get("metrics", {})})
        if key.startswith("rewards/") and key.endswith("/mean")
    }
    generations = rl.config(reads, "num_generations")
    constant = bool(stds) and max(stds) <= SAME_REWARD_STD
    values = sorted({round(v, 4) for v in rewards})
    if constant:
        cause = (
            f"every completion got the same reward ({_values(values)}): the reward function "
            "returns a constant for what this model writes"
        )
    else:
        cause = (
            f"rewards differ between prompts (reward {_values(values)}) but not within a group: "
            "each prompt's completions all succeed or all fail, or are identical"
        )
    overall = rl.mean([v for _, v in points])
    message = (
        f"{rl.trainer_name(reads)}: {late_share:.0%} of the groups of completions had zero "
        f"reward variance over the second half of the run ({overall:.0%} over all "
        f"{len(points)} logs, groups of {generations or '?'} completions): {cause}. Their "
        "advantages are 0, so the loss and the gradient are 0: the run learns nothing"
    )
    first = reads[0]
    return SPEC.finding(
        message,
        evidence={
            "frac_reward_zero_std": [[s, round(v, 3)] for s, v in points[:5] + points[5:][-15:]],
            "late_share": round(late_share, 3),
            "share_all_logs": round(overall, 3),
            "reward_values": values[:10],
            "reward_std_max": round(max(stds), 6) if stds else None,
            "reward_functions": per_function,
            "same_reward_everywhere": constant,
            "loss": [round(v, 6) for _, v in rl.series(reads, "loss")][-5:],
            "grad_norm": [round(v, 6) for _, v in rl.series(reads, "grad_norm")][-5:],
            "num_generations": generations,
            "trainer": rl.config(reads, "trainer"),
            "thresholds": {"zero_share": ZERO_SHARE, "late_share": LATE_SHARE, "min_logs": MIN_LOGS},
        },
        rank=rank,
        step=first.step,
        epoch=epoch_number(first.epoch),
    )


def _values(values: list[float]) -> str:
    shown = ", ".join(f"{v:g}" for v in values[:5])
    return shown + (", ..." if len(values) > 5 else "")
