"""TRN017 `reward-hacking-length`: the reward rises while completions grow to their maximum length.

Collector: the HF guard copies each training log of TRL's `GRPOTrainer` and `RLOOTrainer`
(`rules/_helpers/rl.py`): `reward`, `reward_std`, `completions/mean_length`,
`completions/max_length`, `completions/clipped_ratio` (the share of completions cut at
`max_completion_length`, without EOS) and the configured `max_completion_length`.

Why these thresholds, on general grounds (first quarter of the logs against the last):

- `CLIMB` (a quarter of `max_completion_length`): the mean length must have grown by a
  sizeable part of the budget, not drifted; a run that writes at the maximum from its first
  step (an untrained model that never emits EOS) has not learned length and is left alone.
- `AT_MAX` (90 % of `max_completion_length`) and `CLIPPED` (50 %): a completion that
  answers ends with EOS and leaves room; when the mean length is within a tenth of the
  budget and at least half the completions are cut, the model writes until it is stopped.
- `RISE` (half of the early `reward_std`): the reward went up by at least half the spread
  of the completions' rewards at the start, more than a batch mean moves by chance; the
  policy is being paid for what it learned, and what it learned is length.
At least `MIN_LOGS` (4) logs are required.
"""

from __future__ import annotations

from trainmedic.events import Event, GuardObservation
from trainmedic.findings import Finding, FindingSpec, Severity, epoch_number
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers import rl

CLIMB = 0.25
AT_MAX = 0.9
CLIPPED = 0.5
RISE = 0.5
MIN_LOGS = 4


def _example() -> list[Event]:
    """GRPO with a reward that grows with the completion's length, max_completion_length 256."""
    rows = []
    for i in range(8):
        length = min(256.0, 60.0 + 40.0 * i)
        rows.append(
            {
                "reward": 0.2 + 0.1 * i,
                "reward_std": 0.3,
                "completions/mean_length": length,
                "completions/max_length": 256.0,
                "completions/clipped_ratio": min(1.0, 0.15 * i),
            }
        )
    return rl.example_logs(rows, {"trainer": "GRPOTrainer", "max_completion_length": 256})


SPEC = FindingSpec(
    code="TRN017",
    slug="reward-hacking-length",
    severity=Severity.WARNING,
    title="The reward rises with the completions' length, which reaches its maximum",
    what=(
        "In RL fine-tuning (TRL's GRPOTrainer, RLOOTrainer), the reward rose while the mean "
        "completion length climbed to max_completion_length and most completions were cut "
        "there (completions/clipped_ratio near 1): the policy is learning to write long, not "
        "to solve the task. The lengths against max_completion_length, the clipped ratio and "
        "the reward's rise are given."
    ),
    why=(
        "A reward that grows with length (a length or 'reasoning' bonus, a count of steps or "
        "keywords, a reward model that prefers long answers) is maximised by writing until "
        "the budget ends. The reward curve looks like learning while the completions stop "
        "ending with EOS: at inference they ramble to the token limit. Truncated completions "
        "that still score also teach the model that not stopping costs nothing."
    ),
    example=(
        "GRPOTrainer with a reward of len(completion) / 100 and max_completion_length 256: "
        "the mean length climbs from 60 to 256 tokens, the clipped ratio from 0 to 1, the "
        "reward from 0.2 to 0.9."
    ),
    fix=(
        "Reward the task, not length: cap or remove the length term, score the answer "
        "(accuracy) and the format separately; give truncated completions no reward or a "
        "penalty (mask_truncated_completions=True in GRPOConfig leaves them out of the loss); "
        'use loss_type="dr_grpo" (no per-length normalisation) and check that '
        "max_completion_length leaves room for a full answer."
    ),
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def reward_hacking_length(record: RunRecord) -> list[Finding]:
    """TRN017: per rank, reward up, mean length up to the maximum, completions clipped."""
    found: list[Finding] = []
    for rank, reads in sorted(rl.rl_logs(record).items(), key=rl.by_rank_order):
        finding = _judge(rank, reads)
        if finding is not None:
            found.append(finding)
    return found


RULES: tuple[Rule, ...] = (reward_hacking_length,)


def _limit(reads: list[GuardObservation]) -> float | None:
    value = rl.config(reads, "max_completion_length")
    if isinstance(value, (int, float)) and value > 0:
        return float(value)
    longest = [v for _, v in rl.series(reads, "completions/max_length")]
    return max(longest) if longest else None


def _judge(rank: int | None, reads: list[GuardObservation]) -> Finding | None:
    logged = [
        o
        for o in reads
        if rl.metric(o, "reward") is not None and rl.metric(o, "completions/mean_length") is not None
    ]
    limit = _limit(reads)
    if len(logged) < MIN_LOGS or not limit:
        return None
    rewards = [rl.metric(o, "reward") or 0.0 for o in logged]
    lengths = [rl.metric(o, "completions/mean_length") or 0.0 for o in logged]
    clipped = [v for _, v in rl.series(logged, "completions/clipped_ratio")]
    early_r, late_r = rl.quarters(rewards)
    early_l, late_l = rl.quarters(lengths)
    early_std = rl.quarters([v for _, v in rl.series(logged, "reward_std")])[0]
    rise = rl.mean(late_r) - rl.mean(early_r)
    late_clipped = rl.quarters(clipped)[1] if clipped else []
    if (
        rise > RISE * rl.mean(early_std)
        and rise > 0
        and rl.mean(late_l) - rl.mean(early_l) >= CLIMB * limit
        and rl.mean(late_l) >= AT_MAX * limit
        and (not late_clipped or rl.mean(late_clipped) >= CLIPPED)
    ):
        return _finding(rank, logged, limit=limit, rewards=rewards, lengths=lengths, clipped=clipped)
    return None


def _finding(
    rank: int | None,
    reads: list[GuardObservation],
    *,
    limit: float,
    rewards: list[float],
    lengths: list[float],
    clipped: list[float],
) -> Finding:
    early_r, late_r = rl.quarters(rewards)
    early_l, late_l = rl.quarters(lengths)
    clip_text = ""
    if clipped:
        early_c, late_c = rl.quarters(clipped)
        clip_text = (
            f", the share of completions cut there from {rl.mean(early_c):.0%} to {rl.mean(late_c):.0%}"
        )
    message = (
        f"{rl.trainer_name(reads)}: the reward rose from {rl.mean(early_r):.3g} to "
        f"{rl.mean(late_r):.3g} while the mean completion length climbed from "
        f"{rl.mean(early_l):.3g} to {rl.mean(late_l):.3g} tokens of max_completion_length "
        f"{limit:g}{clip_text}: the policy is paid for length and writes until it is stopped"
    )
    steps = [o.step for o in reads]
    first = reads[0]
    return SPEC.finding(
        message,
        evidence={
            "steps": steps[:5] + steps[5:][-15:],
            "reward": [round(v, 4) for v in rewards[:5] + rewards[5:][-15:]],
            "mean_length": [round(v, 2) for v in lengths[:5] + lengths[5:][-15:]],
            "clipped_ratio": [round(v, 3) for v in clipped[:5] + clipped[5:][-15:]],
            "max_completion_length": limit,
            "trainer": rl.config(reads, "trainer"),
            "thresholds": {"climb": CLIMB, "at_max": AT_MAX, "clipped": CLIPPED, "rise": RISE},
        },
        rank=rank,
        step=first.step,
        epoch=epoch_number(first.epoch),
    )
