"""The content checks of fine-tuning data: contamination between splits (DAT001 exact, DAT002
near), repeated examples within a split (DAT007) and empty completions (DAT008).

An example's content is its turns' texts in order, roles left out, so a `messages` row and a
prompt/completion row with the same texts are the same example; near-duplicates are equal
once whitespace is collapsed and case folded. Free text does not collide by chance: unlike
the tabular checks, no chance yardstick applies. The findings name examples by their place
in the file (the lines of a JSONL file, the rows of a Parquet file). Cost: one hash a row.

Preference pairs are counted as pairs: a pair repeats when its prompt, chosen and rejected
responses all repeat (several pairs per prompt are the rule, not a repeat); an evaluation
pair is contamination when its prompt is a training prompt (the policy was trained to prefer
one answer to that very prompt); a pair is empty when either response is.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from trainmedic.data.finetune.reader import (
    MESSAGES,
    PREFERENCE,
    PROMPT_COMPLETION,
    TEXT,
    Example,
    FineTuneSet,
    Turn,
    file_kind,
)
from trainmedic.evidence.examples import Located
from trainmedic.findings import Finding
from trainmedic.rules.dat import dat001_split_overlap as dat001
from trainmedic.rules.dat import dat002_near_duplicate_overlap as dat002
from trainmedic.rules.dat import dat007_duplicate_rows as dat007
from trainmedic.rules.dat import dat008_missing_values as dat008

MAX_EXAMPLES = 10  # row numbers an evidence lists
_SEPARATOR = "\x1f"
_SIDE = "\x1e"  # between a pair's chosen and rejected turns


def exact_key(example: Example) -> bytes:
    return _digest(_texts(example, lambda content: content))


def near_key(example: Example) -> bytes:
    return _digest(_texts(example, normalised))


def normalised(content: str) -> str:
    """Whitespace collapsed, case folded: how near-duplicates are compared."""
    return " ".join(content.split()).casefold()


def _texts(example: Example, form: Callable[[str], str]) -> str:
    text = _joined(example.prompt + example.completion, form)
    if example.rejected is not None:
        text += _SIDE + _joined(example.rejected, form)
    return text


def _joined(turns: tuple[Turn, ...], form: Callable[[str], str]) -> str:
    return _SEPARATOR.join(form(content) for _, content in turns)


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _prompt_key(form: Callable[[str], str]) -> Callable[[Example], bytes]:
    return lambda example: _digest(_joined(example.prompt, form))


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
    by_prompt = _by_prompt(earlier) and _by_prompt(later)
    exact_of = _prompt_key(lambda content: content) if by_prompt else exact_key
    near_of = _prompt_key(normalised) if by_prompt else near_key
    compared = "prompt" if by_prompt else _compared(later)
    exact = {exact_of(e) for e in earlier.examples}
    near = {near_of(e) for e in earlier.examples}
    same = [e for e in later.examples if exact_of(e) in exact]
    close = [e for e in later.examples if exact_of(e) not in exact and near_of(e) in near]
    findings: list[Finding] = []
    if same:
        distinct = len({exact_of(e) for e in same})
        overlap = dat001.ExampleOverlap(
            pair, len(later), distinct, compared, located(later, same), noun=noun(later)
        )
        findings += dat001.judge_examples(overlap)
    if close:
        near_copies = dat002.NearExampleOverlap(
            pair, len(later), compared, located(later, close), noun=noun(later)
        )
        findings += dat002.judge_examples(near_copies)
    return findings


def _by_prompt(split: FineTuneSet) -> bool:
    """Preference pairs are compared by prompt when every pair has one."""
    return split.format == PREFERENCE and all(any(c.strip() for _, c in e.prompt) for e in split.examples)


def noun(split: FineTuneSet) -> str:
    """What one row of this split is called in a message."""
    return "pair" if split.format == PREFERENCE else "example"


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
    evidence = dat007.RepeatedExamples(
        split.name, len(split), distinct, located(split, repeated), noun=noun(split)
    )
    return dat007.judge_examples(evidence)


def _empty_completions(split: FineTuneSet) -> list[Finding]:
    """Examples whose completion (the last assistant turn; the text of a `text` row) is blank."""
    blank = _blank_completion(split)
    empty = [e for e in split.examples if blank(e)]
    if not empty:
        return []
    evidence = dat008.EmptyCompletions(
        split.name, completion_part(split), len(split), located(split, empty), noun=noun(split)
    )
    return dat008.judge_examples(evidence)


def completion_part(split: FineTuneSet) -> str:
    """What an example's completion is in this format."""
    if split.format == TEXT:
        return TEXT
    if split.format == PREFERENCE:
        return dat008.EITHER_RESPONSE
    return "assistant turn" if split.format == MESSAGES else "completion"


def _blank_completion(split: FineTuneSet) -> Callable[[Example], bool]:
    if split.format == TEXT:
        return lambda e: _blank(e.prompt)
    if split.format == PREFERENCE:
        return lambda e: _blank(e.completion) or _blank(e.rejected or ())
    return lambda e: _blank(e.completion)


def _blank(turns: tuple[Turn, ...]) -> bool:
    return not any(content.strip() for _, content in turns)


def located(split: FineTuneSet, examples: list[Example]) -> Located:
    """Where `examples` are: lines of a JSONL file, rows otherwise."""
    unit = "line" if file_kind(Path(split.path)) == "jsonl" else "row"
    return Located(unit, [e.row for e in examples[:MAX_EXAMPLES]], len(examples))


def _compared(split: FineTuneSet) -> str:
    """The texts compared per example, in the format's words."""
    if split.format == PROMPT_COMPLETION:
        return "prompt and completion"
    if split.format == PREFERENCE:
        return "prompt, chosen and rejected"
    return "conversation" if split.format == MESSAGES else "text"
