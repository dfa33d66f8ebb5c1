"""The content checks of fine-tuning data: contamination between splits (DAT001 exact, DAT002
near), repeated examples within a split (DAT007) and empty completions (DAT008).

An example's content is its turns' texts in order, roles left out, so a `messages` row and a
prompt/completion row with the same texts are the same example; near-duplicates are equal
once whitespace is collapsed and case folded. Free text does not collide by chance: unlike
the tabular checks, no chance yardstick applies. The findings name examples by their place
in the file (the lines of a JSONL file, the rows of a Parquet file). Cost: one hash a row.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from trainmedic.data.finetune.reader import MESSAGES, PROMPT_COMPLETION, TEXT, Example, FineTuneSet, file_kind
from trainmedic.findings import Finding
from trainmedic.rules._helpers.examples import Located
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
        overlap = dat001.ExampleOverlap(pair, len(later), distinct, _compared(later), _located(later, same))
        findings += dat001.judge_examples(overlap)
    if close:
        normalised = dat002.NearExampleOverlap(pair, len(later), _compared(later), _located(later, close))
        findings += dat002.judge_examples(normalised)
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
    evidence = dat007.RepeatedExamples(split.name, len(split), distinct, _located(split, repeated))
    return dat007.judge_examples(evidence)


def _empty_completions(split: FineTuneSet) -> list[Finding]:
    """Examples whose completion (the last assistant turn; the text of a `text` row) is blank."""
    blank = _blank_completion(split)
    empty = [e for e in split.examples if blank(e)]
    if not empty:
        return []
    evidence = dat008.EmptyCompletions(split.name, completion_part(split), len(split), _located(split, empty))
    return dat008.judge_examples(evidence)


def completion_part(split: FineTuneSet) -> str:
    """What an example's completion is in this format."""
    if split.format == TEXT:
        return TEXT
    return "assistant turn" if split.format == MESSAGES else "completion"


def _blank_completion(split: FineTuneSet) -> Callable[[Example], bool]:
    if split.format == TEXT:
        return lambda e: not any(content.strip() for _, content in e.prompt)
    return lambda e: not any(content.strip() for _, content in e.completion)


def _located(split: FineTuneSet, examples: list[Example]) -> Located:
    """Where `examples` are: lines of a JSONL file, rows otherwise."""
    unit = "line" if file_kind(Path(split.path)) == "jsonl" else "row"
    return Located(unit, [e.row for e in examples[:MAX_EXAMPLES]], len(examples))


def _compared(split: FineTuneSet) -> str:
    """The texts compared per example, in the format's words."""
    if split.format == PROMPT_COMPLETION:
        return "prompt and completion"
    return "conversation" if split.format == MESSAGES else "text"
