"""The checks of preference pairs: identical chosen and rejected (DAT018) and the length of the
chosen against the rejected (DAT019).

A pair's response is the text of its turns: a plain string, or the messages of a
conversational pair (compared with their roles, measured by their contents). Identical means
word for word, or equal once whitespace is collapsed and case folded (as the near-duplicate
check compares). Lengths are in characters: no tokenizer is needed, and the comparison of two
responses to the same prompt does not depend on the unit. Cost: one pass over the pairs.
"""

from __future__ import annotations

import statistics

from trainmedic.data.finetune.contents import located, normalised
from trainmedic.data.finetune.reader import PREFERENCE, FineTuneSet, Turn
from trainmedic.findings import Finding
from trainmedic.rules.dat import dat018_identical_preference_pairs as dat018
from trainmedic.rules.dat import dat019_preference_length_bias as dat019


def preference_findings(sets: list[FineTuneSet]) -> list[Finding]:
    """DAT018 and DAT019 for every split of preference pairs (served prompts left out)."""
    findings: list[Finding] = []
    for split in sets:
        if split.format != PREFERENCE or split.name == "serving" or not split.examples:
            continue
        findings += _identical(split)
        findings += dat019.judge(length_bias(split))
    return findings


def _identical(split: FineTuneSet) -> list[Finding]:
    exact = [e for e in split.examples if e.completion == e.rejected]
    near = [e for e in split.examples if e.completion != e.rejected and _near(e.completion, e.rejected or ())]
    both = sorted(exact + near, key=lambda e: e.row)
    evidence = dat018.IdenticalPairs(split.name, len(split), len(exact), len(near), located(split, both))
    return dat018.judge(evidence)


def _near(chosen: tuple[Turn, ...], rejected: tuple[Turn, ...]) -> bool:
    return [(role, normalised(text)) for role, text in chosen] == [
        (role, normalised(text)) for role, text in rejected
    ]


def length_bias(split: FineTuneSet) -> dat019.LengthBias:
    """How often the chosen response is the longer one, and by how much."""
    sizes = [(_length(e.completion), _length(e.rejected or ())) for e in split.examples]
    ratios = [c / r for c, r in sizes if r > 0 and c != r]
    return dat019.LengthBias(
        split=split.name,
        pairs=len(sizes),
        chosen_longer=sum(c > r for c, r in sizes),
        rejected_longer=sum(c < r for c, r in sizes),
        median_ratio=statistics.median(ratios) if ratios else 1.0,
        chosen_mean=statistics.fmean(c for c, _ in sizes),
        rejected_mean=statistics.fmean(r for _, r in sizes),
    )


def _length(turns: tuple[Turn, ...]) -> int:
    return sum(len(text) for _, text in turns)
