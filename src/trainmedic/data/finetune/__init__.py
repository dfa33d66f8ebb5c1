"""`trainmedic check data` for fine-tuning data sets (JSONL or Parquet in TRL's formats).

`is_finetune_file` tells a fine-tuning file from a table by its keys (`messages`, `prompt` and
`completion`, `chosen` and `rejected`; `text` alone); `check_finetune_report` reads the splits
(`reader`) and runs the content checks (`contents`: DAT001, DAT002, DAT007, DAT008), the
checks of preference pairs (`preference`: DAT018, DAT019), the template check (`templates`:
DAT016), with a tokenizer the double-BOS check (`bos`: DAT020) and, with a maximum length too,
the truncation check (`lengths`: DAT017). Each measures and hands its evidence to the
finding's file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainmedic.data.finetune import bos, contents, lengths, preference, templates
from trainmedic.data.finetune.reader import (
    MESSAGES,
    PREFERENCE,
    PROMPT_COMPLETION,
    FineTuneSet,
    file_kind,
    format_of,
    peek_keys,
    read_set,
)
from trainmedic.data.finetune.tokenizer import load_tokenizer
from trainmedic.errors import UsageError
from trainmedic.findings import Finding, sort_findings

__all__ = ["FineTuneReport", "FineTuneSummary", "check_finetune_report", "is_finetune_file"]


def is_finetune_file(path: str | Path, *, asked: bool = False) -> bool:
    """A JSONL/Parquet file of `messages`, `prompt`/`completion` or `chosen`/`rejected` rows, or
    of `text` rows alone; anything else stays a table. `asked` (--tokenizer or --max-length
    given): any JSONL/Parquet file is fine-tuning data, and the reader names what is wrong with it."""
    if asked:
        return file_kind(Path(path)) is not None
    keys = peek_keys(Path(path))
    if not keys:
        return False
    fmt = format_of(keys)
    if fmt in (MESSAGES, PROMPT_COMPLETION, PREFERENCE):
        return True
    return fmt is not None and set(keys) == {"text"}


@dataclass(frozen=True, slots=True)
class FineTuneSummary:
    """The splits read (rows and format each), the tokenizer and the notes on what was measured."""

    rows: dict[str, int]
    formats: dict[str, str]
    tokenizer: str | None = None
    max_length: int | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "formats": self.formats,
            "tokenizer": self.tokenizer,
            "max_length": self.max_length,
            "notes": self.notes,
        }

    def lines(self) -> list[str]:
        rows = ", ".join(f"{name} {count:,}" for name, count in self.rows.items())
        formats = ", ".join(f"{name} {fmt}" for name, fmt in self.formats.items())
        out = [f"rows: {rows}", f"fine-tuning format: {formats}"]
        if self.tokenizer is not None:
            length = f", max length {self.max_length:,}" if self.max_length is not None else ""
            out.append(f"tokenizer: {self.tokenizer}{length}")
        out.extend(f"note: {note}" for note in self.notes)
        return out


@dataclass(frozen=True, slots=True)
class FineTuneReport:
    summary: FineTuneSummary
    findings: list[Finding]


def check_finetune_report(
    train: str,
    val: str | None = None,
    test: str | None = None,
    serving: str | None = None,
    *,
    tokenizer: str | None = None,
    max_length: int | None = None,
) -> FineTuneReport:
    """The summary and the findings; raises `UsageError` (one line) for bad input."""
    if max_length is not None and max_length < 1:
        raise UsageError(f"--max-length {max_length}: expected a positive number of tokens")
    if max_length is not None and tokenizer is None:
        raise UsageError("--max-length needs --tokenizer PATH: tokens are counted with the model's tokenizer")
    sets = [read_set("train", train)]
    sets += [read_set(name, path) for name, path in (("val", val), ("test", test)) if path is not None]
    if serving is not None:
        sets.append(read_set("serving", serving, serving=True))
    loaded = load_tokenizer(tokenizer) if tokenizer is not None else None
    findings = contents.content_findings(sets)
    findings += preference.preference_findings(sets)
    findings += templates.template_findings(sets, loaded)
    notes = []
    if loaded is not None:
        findings += bos.double_bos_findings(sets, loaded)
        notes += bos.conversational_note(sets, loaded)
    if loaded is not None and max_length is not None:
        for split in (s for s in sets if s.name != "serving"):
            measured = lengths.measure(split, loaded)
            findings += lengths.truncation_findings(split, measured, max_length)
            notes += _eos_notes(split, measured, loaded)
    elif loaded is not None:
        notes.append("truncation not measured: give --max-length N (the trainer's max_length)")
    summary = FineTuneSummary(
        rows={s.name: len(s) for s in sets},
        formats={s.name: _format_name(s) for s in sets},
        tokenizer=tokenizer,
        max_length=max_length,
        notes=notes,
    )
    return FineTuneReport(summary, sort_findings(findings))


def _eos_notes(split: FineTuneSet, measured: list[lengths.Lengths], tokenizer: Any) -> list[str]:
    without = sum(not x.eos_in_completion for x in measured)
    if not without:
        return []
    if split.format == PREFERENCE:
        return [
            f"{split.name}: {without:,} of {len(measured):,} pairs have no EOS token "
            f"({tokenizer.eos_token!r}) in a response once rendered: the policy does not learn to stop"
        ]
    return [
        f"{split.name}: {without:,} of {len(measured):,} examples have no EOS token "
        f"({tokenizer.eos_token!r}) in their completion once rendered: the model does not learn to stop"
    ]


def _format_name(split: FineTuneSet) -> str:
    conversational = bool(split.examples) and split.examples[0].conversational
    if split.format in (PROMPT_COMPLETION, PREFERENCE) and conversational:
        return f"conversational {split.format}"
    return split.format
