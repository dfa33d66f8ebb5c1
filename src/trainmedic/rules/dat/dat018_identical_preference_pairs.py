"""DAT018 `identical-preference-pairs`: preference pairs whose chosen and rejected are the same.

Collector: `trainmedic check data` (`trainmedic.data.finetune.preference`) compares, in each
split of preference pairs (TRL's `prompt`/`chosen`/`rejected`, plain or conversational), every
pair's chosen response with its rejected one: word for word (the text; for conversational
pairs the messages, role and content), then with whitespace collapsed and case folded; it
sends `IdenticalPairs`. The guard (`trainmedic.llm.preference`, on TRL's `DPOTrainer` under
`trainmedic run` and `trainmedic.hf.Guard`) compares, on checked batches, each pair's chosen
and rejected token ids as TRL built them and sends `GUARD_OBSERVATION`: the same judge words it,
the steps standing for the line numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from trainmedic.evidence.examples import Located
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers.finetune import FineTuneExample

#: The guard's count of the pairs of the batches DPOTrainer built (`pairs`, `identical`,
#: `identical_steps`), sent after each checked batch; the last one of a process holds its totals.
GUARD_OBSERVATION = "preference_pairs"

# No share threshold: a pair that states no preference is never what a data set means to hold,
# and chance does not make two free-text responses equal; every such pair is reported.


def _example() -> FineTuneExample:
    """A join that wrote the chosen answer into `rejected` for 15 of 40 pairs."""
    rows = []
    for i in range(40):
        chosen = f"{i} plus {i + 1} is {2 * i + 1}."
        rejected = chosen if i % 8 < 3 else f"{i} plus {i + 1} is {2 * i + 3}."
        rows.append({"prompt": f"What is {i} plus {i + 1}?", "chosen": chosen, "rejected": rejected})
    return FineTuneExample({"train": rows})


SPEC = FindingSpec(
    code="DAT018",
    slug="identical-preference-pairs",
    severity=Severity.WARNING,
    title="Identical preference pairs",
    what=(
        "Preference pairs whose chosen and rejected responses are identical, word for word or "
        "up to whitespace and case (conversational pairs: the same messages): they carry no "
        "preference. The share of such pairs per split and their line numbers are given."
    ),
    why=(
        "A DPO-family loss compares the policy's log-probability ratio on the chosen response with "
        "the one on the rejected response. For the same text the difference is 0 whatever the "
        "weights: each such pair adds exactly ln 2 = 0.693 to the sigmoid DPO loss and no gradient, "
        "so by its share it pulls the logged loss toward ln 2, the reward margins toward 0 and the "
        "reward accuracy down (a tie is no win), and spends compute on nothing. Pairs that differ "
        "only in case or spacing teach a preference for case or spacing. They come from "
        "data-preparation slips: a column written twice, a join that repeats the best answer, two "
        "responses sampled greedily."
    ),
    example=(
        "A preference file where a join wrote the chosen answer into `rejected` for a third of the pairs:\n"
        "  trainmedic check data prefs.jsonl\n"
        "  WARNING DAT018 identical-preference-pairs: 238 of 728 train pairs (32.7%) have the same "
        "chosen and rejected response: 238 word for word, 0 up to case and whitespace (lines 1, 4, 7, ...)"
    ),
    fix=(
        "Drop the pairs whose chosen equals rejected before building DPOTrainer, e.g. "
        "`dataset = dataset.filter(lambda x: x['chosen'] != x['rejected'])` (compare the texts "
        "lower-cased with whitespace collapsed to drop the near copies too), then find the step "
        "that made them."
    ),
    decided_in=("run events", "torch guard", "fine-tune data"),
    example_input=_example,
)


@dataclass(frozen=True, slots=True)
class IdenticalPairs:
    """Pairs of `split` (of `pairs`) whose responses are the same: `exact` word for word, `near`
    only up to whitespace and case; `where` lists both, in read order."""

    split: str
    pairs: int
    exact: int
    near: int
    where: Located


def message(evidence: IdenticalPairs) -> str:
    count = evidence.exact + evidence.near
    return (
        f"{count:,} of {evidence.pairs:,} {evidence.split} pairs ({count / evidence.pairs:.1%}) "
        f"{'has' if count == 1 else 'have'} the same chosen and rejected response: {evidence.exact:,} "
        f"word for word, {evidence.near:,} up to case and whitespace ({evidence.where.words()})"
    )


def judge(evidence: IdenticalPairs) -> list[Finding]:
    count = evidence.exact + evidence.near
    if count == 0 or evidence.pairs == 0:
        return []
    data = {
        "split": evidence.split,
        "pairs": evidence.pairs,
        "identical_pairs": count,
        "fraction": round(count / evidence.pairs, 6),
        "word_for_word": evidence.exact,
        "up_to_case_and_whitespace": evidence.near,
        evidence.where.key: evidence.where.numbers,
    }
    return [SPEC.finding(message(evidence), evidence=data)]


def guard_rule(record: RunRecord) -> list[Finding]:
    """The guard's totals of the checked batches, per process: identical token ids in a pair."""
    last: dict[tuple[int, int | None], Mapping[str, Any]] = {}
    steps: dict[tuple[int, int | None], int | None] = {}
    for obs in record.guard_observations:
        if obs.check == GUARD_OBSERVATION:
            last[(obs.pid, obs.rank)] = obs.data
            steps[(obs.pid, obs.rank)] = obs.step
    found: list[Finding] = []
    for (pid, rank), data in last.items():
        where = [int(s) for s in data.get("identical_steps") or []]
        evidence = IdenticalPairs(
            split="train (DPOTrainer's checked batches)",
            pairs=int(data.get("pairs", 0)),
            exact=int(data.get("identical", 0)),
            near=0,
            where=Located("step", where, len(where)),
        )
        found += [replace(f, pid=pid, rank=rank, step=steps[(pid, rank)]) for f in judge(evidence)]
    return found


RULES: tuple[Rule, ...] = (guard_rule,)
