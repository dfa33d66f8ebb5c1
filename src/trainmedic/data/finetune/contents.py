"""The content checks of fine-tuning data: contamination between splits (DAT001 exact, DAT002
near), repeated examples within a split (DAT007) and empty completions (DAT008).

An example's content is its turns' texts in order, roles left out, so a `messages` row and a
prompt/completion row with the same texts are the same example; near-duplicates are equal
once whitespace is collapsed and case folded. Free text does not collide by chance: the
chance yardstick of the tabular checks is set to none expected. Cost: one hash a row.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable

from trainmedic.data.finetune.reader import TEXT, Example, FineTuneSet
from trainmedic.findings import Finding
from trainmedic.rules._helpers.chance import Chance
from trainmedic.rules.dat import dat001_split_overlap as dat001
from trainmedic.rules.dat import dat002_near_duplicate_overlap as dat002
from trainmedic.rules.dat import dat007_duplicate_rows as dat007
from trainmedic.rules.dat import dat008_missing_values as dat008

MAX_EXAMPLES = 10  # row numbers an evidence lists
_SEPARATOR = "\x1f"


def exact_key(example: Example) -> bytes:
    text = _SEPARATOR.join(content for _, content in example.prompt + example.completion)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def near_key(example: Example) -> bytes:
    text = _SEPARATOR.join(
        " ".join(content.split()).casefold() for _, content in example.prompt + example.completion
    )
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def no_chance(observed: int) -> Chance:
    """Texts written independently do not coincide: none expected by chance."""
    return Chance(observed=observed, expected=0.0, combinations=math.inf, p_value=0.0 if observed else 1.0)


def content_findings(sets: list[FineTuneSet]) -> list[Finding]:
    """DAT001/DAT002 for each later split against each earlier; DAT007 and DAT008 per split."""
    findings: list[Finding] = []
    trained = [s for s in sets if s.name != "serving"]
    for i, later in enumerate(trained):
        for earlier in trained[:i]:
            findings.extend(_overlap(earlier, later))
    for split in trained:
        findings.extend(_repeats(split))
        findings.extend(_empty_completions(split))
    return findings


def _overlap(earlier: FineTuneSet, later: FineTuneSet) -> list[Finding]:
    pair = (earlier.name, later.name)
    exact = {exact_key(e) for e in earlier.examples}
    near = {near_key(e) for e in earlier.examples}
    same = [e for e in later.examples if exact_key(e) in exact]
    close = [e for e in later.examples if exact_key(e) not in exact and near_key(e) in near]
    findings: list[Finding] = []
    if same:
        distinct = len({exact_key(e) for e in same})
        findings += dat001.judge(
            dat001.Overlap(
                pair, len(same), len(later), distinct, _rows(same), _fields(later), no_chance(len(same))
            )
        )
    if close:
        findings += dat002.judge(dat002.NearDuplicates(pair, len(close), len(later), _rows(close), 0, None))
    return findings


def _repeats(split: FineTuneSet) -> list[Finding]:
    seen: set[bytes] = set()
    repeated: list[Example] = []
    for example in split.examples:
        key = exact_key(example)
        if key in seen:
            repeated.append(example)
        seen.add(key)
    if not repeated:
        return []
    distinct = len({exact_key(e) for e in repeated})
    evidence = dat007.RepeatedRows(
        split.name, len(split), len(repeated), distinct, _rows(repeated), no_chance(len(repeated))
    )
    return dat007.judge(evidence)


def _empty_completions(split: FineTuneSet) -> list[Finding]:
    """Examples whose completion (the last assistant turn; the text of a `text` row) is blank."""
    column, blank = completion_column(split), _blank_completion(split)
    empty = [e for e in split.examples if blank(e)]
    if not empty:
        return []
    return dat008.judge(dat008.MissingLabels(split.name, column, len(empty), len(split), _rows(empty)))


def completion_column(split: FineTuneSet) -> str:
    if split.format == TEXT:
        return TEXT
    return "messages (assistant turn)" if split.format == "messages" else "completion"


def _blank_completion(split: FineTuneSet) -> Callable[[Example], bool]:
    if split.format == TEXT:
        return lambda e: not any(content.strip() for _, content in e.prompt)
    return lambda e: not any(content.strip() for _, content in e.completion)


def _rows(examples: list[Example]) -> list[object]:
    return [e.row for e in examples[:MAX_EXAMPLES]]


def _fields(split: FineTuneSet) -> int:
    """The texts compared per example: prompt and completion, or the one text/conversation."""
    return 2 if split.format == "prompt-completion" else 1
