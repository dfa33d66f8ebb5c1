"""DAT019 `preference-length-bias`: the chosen response is the longer one in nearly all pairs.

Collector: `trainmedic check data` (`trainmedic.data.finetune.preference`) measures, in each
split of preference pairs, the length in characters of each pair's chosen and rejected
responses (the text of all their turns) and sends `LengthBias`: the pairs where the chosen is
longer, where the rejected is, and the median ratio of the two lengths. The guard
(`trainmedic.llm.preference`, on TRL's `DPOTrainer`) counts the same on its checked batches, in
tokens (each side's `completion_mask`), and sends them in `dat018.GUARD_OBSERVATION`'s observation:
the same judge, `unit` "tokens".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from trainmedic.events import GuardObservation
from trainmedic.evidence.chance import CHANCE_P_VALUE
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers.finetune import FineTuneExample
from trainmedic.rules.dat.dat018_identical_preference_pairs import GUARD_OBSERVATION

# Longer answers are often the better ones (more complete, more careful), so a healthy set
# prefers the longer response in more pairs than not. At this share the odds are 4 to 1: only
# one pair in five still tells the policy that length is not what is rewarded, and "longer
# wins" is a rule of the data, not a tendency. Ties (equal lengths) count for neither side.
LONGER_SHARE = 0.8
# The sign test against 50 %, at the level the other data checks use for "beyond chance": a
# set whose lengths have nothing to do with the preference trips it once in a thousand.
P_VALUE = CHANCE_P_VALUE
# Fewer pairs with a longer side are a smoke test, not a data set: below 20 the share moves by
# 5 points a pair, and with the test above only 18 or more of 20 would pass anyway.
MIN_PAIRS = 20


def _example() -> FineTuneExample:
    """Chosen answers written out in full, rejected ones cut short, in 57 of 60 pairs."""
    rows = []
    for i in range(60):
        full = f"{i} plus {i + 1} is {2 * i + 1}, because adding one to {i} twice gives {2 * i + 1}."
        hedged = f"{i} plus {i + 1} is {2 * i + 3}, since adding one to {i} twice, then one more, gives {2 * i + 3}."
        rejected = f"{2 * i + 3}." if i % 20 else hedged
        rows.append({"prompt": f"What is {i} plus {i + 1}?", "chosen": full, "rejected": rejected})
    return FineTuneExample({"train": rows})


SPEC = FindingSpec(
    code="DAT019",
    slug="preference-length-bias",
    severity=Severity.WARNING,
    title="Preference length bias",
    what=(
        "The chosen response is the longer one in nearly all preference pairs (at least "
        f"{LONGER_SHARE:.0%} of the pairs whose lengths differ, beyond chance by a sign test): "
        "length alone predicts the preference. The share and the median length ratio of chosen "
        "to rejected are given."
    ),
    why=(
        "A preference objective (DPO and its family, a reward model) learns whatever separates "
        "chosen from rejected; when length does that in nearly every pair, the cheapest thing to "
        "learn is to write more. The trained policy grows verbose, its win rates against a judge "
        "that favours length rise while quality does not, and a reward model trained on the set "
        "rewards length. Such sets come from rejected responses sampled with a short token limit "
        "(cut off), from chosen responses written or edited by people who expand, or from a "
        "rating that rewarded thoroughness."
    ),
    example=(
        "Chosen answers written out in full, rejected ones sampled with max_new_tokens=32:\n"
        "  trainmedic check data prefs.jsonl\n"
        "  WARNING DAT019 preference-length-bias: In 57 of 60 train pairs (95.0%) the chosen "
        "response is the longer one (median length ratio chosen/rejected 19.33): length alone "
        "predicts the preference"
    ),
    fix=(
        "Rebalance the pairs so that length does not decide: drop pairs whose chosen is much longer "
        "than their rejected, or add pairs where the shorter answer wins (rejected responses "
        "sampled without a short token limit); or train with a length-desensitised objective, "
        "DPOConfig(ld_alpha=0.5) (LD-DPO) or DPOConfig(loss_type=['sigmoid_norm']) (log-ratios "
        "averaged per token), and watch the completion lengths of the trained policy."
    ),
    decided_in=("run events", "torch guard", "fine-tune data"),
    example_input=_example,
)


@dataclass(frozen=True, slots=True)
class LengthBias:
    """The lengths of the pairs of `split`: how many pairs have the longer chosen, the longer
    rejected (the rest tie), the median of chosen length / rejected length over the pairs whose
    lengths differ (an empty rejected left out), and the mean lengths, in `unit`."""

    split: str
    pairs: int
    chosen_longer: int
    rejected_longer: int
    median_ratio: float
    chosen_mean: float
    rejected_mean: float
    unit: str = "characters"


def sign_test(longer: int, decided: int) -> float:
    """P(X >= longer) for X ~ Binomial(decided, 1/2): one-sided, exact, in log space."""
    if decided <= 0 or longer <= 0:
        return 1.0
    log_half = decided * math.log(0.5)
    logs = [_log_comb(decided, k) + log_half for k in range(longer, decided + 1)]
    top = max(logs)
    return min(1.0, math.exp(top) * sum(math.exp(x - top) for x in logs))


def _log_comb(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def biased(evidence: LengthBias) -> bool:
    """Enough pairs, the floor share and beyond chance."""
    decided = evidence.chosen_longer + evidence.rejected_longer
    if decided < MIN_PAIRS or evidence.chosen_longer / decided < LONGER_SHARE:
        return False
    return sign_test(evidence.chosen_longer, decided) < P_VALUE


def message(evidence: LengthBias) -> str:
    decided = evidence.chosen_longer + evidence.rejected_longer
    return (
        f"In {evidence.chosen_longer:,} of {decided:,} {evidence.split} pairs "
        f"({evidence.chosen_longer / decided:.1%}) the chosen response is the longer one (median "
        f"length ratio chosen/rejected {evidence.median_ratio:.2f}): length alone predicts the preference"
    )


def judge(evidence: LengthBias) -> list[Finding]:
    if not biased(evidence):
        return []
    decided = evidence.chosen_longer + evidence.rejected_longer
    data = {
        "split": evidence.split,
        "pairs": evidence.pairs,
        "chosen_longer": evidence.chosen_longer,
        "rejected_longer": evidence.rejected_longer,
        "equal_length": evidence.pairs - decided,
        "chosen_longer_share": round(evidence.chosen_longer / decided, 6),
        "sign_test_p_value": float(f"{sign_test(evidence.chosen_longer, decided):.3g}"),
        "median_length_ratio": round(evidence.median_ratio, 4),
        "chosen_mean_length": round(evidence.chosen_mean, 1),
        "rejected_mean_length": round(evidence.rejected_mean, 1),
        "length_unit": evidence.unit,
    }
    return [SPEC.finding(message(evidence), evidence=data)]


def guard_rule(record: RunRecord) -> list[Finding]:
    """The guard's totals of DPOTrainer's checked batches, per process, in tokens."""
    last: dict[tuple[int, int | None], GuardObservation] = {}
    for obs in record.guard_observations:
        if obs.check == GUARD_OBSERVATION and "chosen_longer" in obs.data:
            last[(obs.pid, obs.rank)] = obs
    found: list[Finding] = []
    for obs in last.values():
        data = obs.data
        evidence = LengthBias(
            split="train (DPOTrainer's checked batches)",
            pairs=int(data.get("pairs", 0)),
            chosen_longer=int(data.get("chosen_longer", 0)),
            rejected_longer=int(data.get("rejected_longer", 0)),
            median_ratio=float(data.get("median_ratio", 1.0)),
            chosen_mean=float(data.get("chosen_mean_tokens", 0.0)),
            rejected_mean=float(data.get("rejected_mean_tokens", 0.0)),
            unit="tokens",
        )
        found += [replace(f, pid=obs.pid, rank=obs.rank, step=obs.step) for f in judge(evidence)]
    return found


RULES: tuple[Rule, ...] = (guard_rule,)
