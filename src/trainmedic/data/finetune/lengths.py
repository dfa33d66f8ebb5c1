"""DAT017's measure: examples whose completion does not fit in `--max-length` tokens.

Each example is rendered and tokenized as TRL's SFTTrainer prepares it: conversational rows
with the tokenizer's chat template (the prompt: the turns before the last assistant turn,
with the generation prompt), plain prompt/completion as prompt + completion + EOS, `text` as
text + EOS. The completion starts where the prompt's tokens and the whole example's diverge;
TRL keeps the first `max_length` tokens, so an example whose prompt fills `max_length` has no
completion left (dropped) and a longer one loses its end (cut). Also counted for the summary:
examples with no EOS token in their completion once rendered. Cost: one tokenization of every
example (up to `MAX_MEASURED`, evenly spaced beyond).

A preference pair is rendered twice, as TRL's DPOTrainer does (prompt + chosen, prompt +
rejected, each with EOS when plain): its prompt ends where the shorter common prefix does, it
is dropped when that prompt fills `max_length` (DPOTrainer drops it), and cut when either side
is longer than `max_length`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from trainmedic.data.finetune.reader import PREFERENCE, TEXT, Example, FineTuneSet
from trainmedic.data.finetune.tokenizer import render
from trainmedic.errors import UsageError
from trainmedic.findings import Finding
from trainmedic.rules.dat import dat017_completion_truncated as dat017

MAX_MEASURED = 100_000
MAX_ROWS_LISTED = 10


@dataclass(frozen=True, slots=True)
class Lengths:
    """Token counts of one example: its prompt's and the whole rendered example's."""

    row: int
    prompt: int
    total: int
    eos_in_completion: bool


def measure(split: FineTuneSet, tokenizer: Any) -> list[Lengths]:
    """The examples' token counts (those without a completion left out: DAT008 reports them)."""
    picked = [e for e in _spread(split.examples) if split.format == TEXT or e.completion]
    if split.format != PREFERENCE:
        return _measured(picked, tokenizer, split.path)
    chosen = _measured(picked, tokenizer, split.path)
    rejected = _measured([replace(e, completion=e.rejected or ()) for e in picked], tokenizer, split.path)
    return [
        Lengths(
            c.row, min(c.prompt, r.prompt), max(c.total, r.total), c.eos_in_completion and r.eos_in_completion
        )
        for c, r in zip(chosen, rejected, strict=True)
    ]


def _measured(picked: list[Example], tokenizer: Any, path: str) -> list[Lengths]:
    prompts, fulls = (
        zip(*(_rendered(e, tokenizer, path) for e in picked), strict=True) if picked else ((), ())
    )
    special = not (picked and picked[0].conversational)  # a rendered template holds its own BOS
    prompt_ids = _ids(tokenizer, list(prompts), special)
    full_ids = _ids(tokenizer, list(fulls), special)
    eos = tokenizer.eos_token_id
    out = []
    for example, p_ids, f_ids in zip(picked, prompt_ids, full_ids, strict=True):
        start = _common_prefix(p_ids, f_ids) if p_ids else 0
        out.append(Lengths(example.row, start, len(f_ids), eos is not None and eos in f_ids[start:]))
    return out


def truncation_findings(split: FineTuneSet, lengths: list[Lengths], max_length: int) -> list[Finding]:
    dropped = [x for x in lengths if x.prompt >= max_length]
    cut = [x for x in lengths if x.prompt < max_length < x.total]
    listed = sorted(dropped + cut, key=lambda x: x.row)[:MAX_ROWS_LISTED]
    evidence = dat017.Truncation(
        split=split.name,
        noun="pair" if split.format == PREFERENCE else "example",
        max_length=max_length,
        examples=len(lengths),
        cut=len(cut),
        dropped=len(dropped),
        rendered=_how_rendered(split),
        longest=max((x.total for x in lengths), default=0),
        example_rows=[x.row for x in listed],
    )
    return dat017.judge(evidence)


def _how_rendered(split: FineTuneSet) -> str:
    pair = split.format == PREFERENCE
    if split.examples and split.examples[0].conversational:
        return "chat template, prompt + chosen and prompt + rejected" if pair else "chat template"
    if pair:
        return "prompt + chosen + EOS and prompt + rejected + EOS"
    return "text + EOS" if split.format == TEXT else "prompt + completion + EOS"


def _rendered(example: Example, tokenizer: Any, path: str) -> tuple[str, str]:
    """(prompt, whole example) as text, TRL's way; the prompt of a `text` row is empty."""
    if example.conversational:
        try:
            prompt = render(tokenizer, example.messages(example.prompt), generation_prompt=True)
            return prompt, render(tokenizer, example.messages())
        except Exception as exc:  # jinja's errors: a template that rejects these roles
            raise UsageError(
                f"{path} row {example.row}: the --tokenizer's chat template cannot render it ({exc}); "
                "expected messages its template accepts"
            ) from None
    eos = tokenizer.eos_token or ""
    text = "".join(content for _, content in example.prompt + example.completion)
    if not text.endswith(eos):
        text += eos
    prompt = "" if not example.completion else "".join(content for _, content in example.prompt)
    return prompt, text


def _ids(tokenizer: Any, texts: list[str], special: bool) -> list[list[int]]:
    """Token ids as TRL gets them: the tokenizer's call for plain text (special tokens added),
    without special tokens for a rendered chat template (as `apply_chat_template` tokenizes)."""
    if not texts:
        return []
    ids = tokenizer(texts, add_special_tokens=special)["input_ids"]
    return [list(x) for x in ids]


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _spread(examples: list[Example]) -> list[Example]:
    if len(examples) <= MAX_MEASURED:
        return examples
    step = len(examples) / MAX_MEASURED
    return [examples[int(i * step)] for i in range(MAX_MEASURED)]
