"""Read a fine-tuning data set (JSONL or Parquet) into examples, or fail with one line.

The formats are TRL's: conversational (`messages`: a list of {role, content}),
prompt/completion (`prompt`, `completion`: strings, or both lists of messages: TRL's
conversational prompt/completion), preference pairs (`chosen`, `rejected` and, explicit or
not, `prompt`: strings, or lists of messages) and plain `text` (already rendered). The format
is told from the first row's keys (a Parquet file's columns); every row must then have its
keys. Served prompts (`--serving`) need no completion: `prompt` (or `messages`, `text`) alone.

A pair without a `prompt` holds it implicitly: TRL's `extract_prompt` takes the longest
common start of `chosen` and `rejected` (messages, or characters) as the prompt, and so does
the reader.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainmedic.errors import UsageError, install_hint

MESSAGES = "messages"
PROMPT_COMPLETION = "prompt-completion"
PREFERENCE = "preference"
TEXT = "text"
PROMPT_ONLY = "prompt"  # served prompts

SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet", ".pq": "parquet"}
EXPECTED = (
    "rows with 'messages' (a list of {role, content}), 'prompt' and 'completion', "
    "'chosen' and 'rejected' (a preference pair), or 'text'"
)

#: One turn: (role, content); a plain prompt or completion string has the role "".
Turn = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Example:
    """One row: the turns before the completion and the completion's (text: all in `prompt`);
    a preference pair's chosen response is its completion, and `rejected` the other one."""

    row: int  # 1-based: the line of a JSONL file, the row of a Parquet file
    prompt: tuple[Turn, ...]
    completion: tuple[Turn, ...]
    rejected: tuple[Turn, ...] | None = None  # None: not a preference pair

    @property
    def conversational(self) -> bool:
        return any(role for role, _ in self.prompt + self.completion + (self.rejected or ()))

    @property
    def pair(self) -> bool:
        return self.rejected is not None

    def messages(self, turns: tuple[Turn, ...] | None = None) -> list[dict[str, str]]:
        """Turns as the message dicts `apply_chat_template` takes (all of them by default)."""
        chosen = self.prompt + self.completion if turns is None else turns
        return [{"role": role, "content": content} for role, content in chosen]


@dataclass(frozen=True, slots=True)
class FineTuneSet:
    """The examples of one split, in read order, and the format they were written in."""

    name: str
    path: str
    format: str  # MESSAGES, PROMPT_COMPLETION, TEXT or PROMPT_ONLY
    examples: list[Example]

    def __len__(self) -> int:
        return len(self.examples)


def file_kind(path: Path) -> str | None:
    """'jsonl' or 'parquet' by the suffix (a compressed JSONL too), None for any other file."""
    suffixes = [s.lower() for s in path.suffixes]
    if len(suffixes) > 1 and suffixes[-1] in (".gz", ".bz2", ".xz", ".zst"):
        suffixes.pop()
    return SUFFIXES.get(suffixes[-1]) if suffixes else None


def format_of(keys: list[str] | set[str], *, serving: bool = False) -> str | None:
    """The fine-tuning format these keys name, None when they name none."""
    if MESSAGES in keys:
        return MESSAGES
    if "chosen" in keys and "rejected" in keys:
        return PREFERENCE
    if "prompt" in keys and "completion" in keys:
        return PROMPT_COMPLETION
    if serving and "prompt" in keys:
        return PROMPT_ONLY
    if TEXT in keys:
        return TEXT
    return None


def peek_keys(path: Path) -> list[str] | None:
    """The first row's keys (a Parquet file's columns) without reading the file; None when it
    is no JSONL/Parquet file or cannot be read as one (the table reader then names the problem)."""
    kind = file_kind(path)
    if kind is None or not path.is_file():
        return None
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            return list(pq.read_schema(path).names)
        for _, row in _jsonl_rows(path):
            return list(row) if isinstance(row, dict) else None
    except (UsageError, OSError, ValueError, ImportError):
        return None
    return None


def read_set(name: str, path: str | Path, *, serving: bool = False) -> FineTuneSet:
    """Every row of `path` as examples; raises `UsageError` naming the file, the row and what was
    expected for a missing file, a row that is no JSON object or lacks its format's keys."""
    where = Path(path)
    if not where.is_file():
        raise UsageError(f"{where}: no such file; expected a JSONL or Parquet file of fine-tuning examples")
    kind = file_kind(where)
    if kind is None:
        raise UsageError(
            f"{where}: unknown format {where.suffix!r}; expected a .jsonl or .parquet file of {EXPECTED}"
        )
    rows = _jsonl_rows(where) if kind == "jsonl" else _parquet_rows(where)
    fmt: str | None = None
    examples = []
    for row_number, row in rows:
        if not isinstance(row, dict):
            raise UsageError(f"{where} row {row_number}: expected a JSON object with {EXPECTED}")
        if fmt is None:
            fmt = format_of(set(row), serving=serving)
            if fmt is None:
                found = ", ".join(repr(k) for k in list(row)[:8]) or "none"
                raise UsageError(f"{where}: expected {EXPECTED} (found keys: {found})")
        examples.append(_example(where, row_number, row, fmt))
    if fmt is None:
        raise UsageError(f"{where}: no rows; expected {EXPECTED}")
    return FineTuneSet(name, str(where), fmt, examples)


def set_of_rows(name: str, source: str, rows: list[tuple[int, dict[str, Any]]], fmt: str) -> FineTuneSet:
    """Rows already in memory (a `datasets.Dataset` handed to a trainer) as examples of `fmt`;
    `UsageError` as `read_set` for a row without its format's keys."""
    return FineTuneSet(name, source, fmt, [_example(Path(source), n, row, fmt) for n, row in rows])


def _jsonl_rows(path: Path) -> Iterator[tuple[int, Any]]:
    opener = _opener(path)
    try:
        with opener(path, "rt", encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    yield number, json.loads(line)
                except json.JSONDecodeError as exc:
                    raise UsageError(
                        f"{path} line {number}: not JSON ({exc.msg}); expected one JSON object a line"
                    ) from None
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise UsageError(f"{path}: cannot read as JSONL ({exc}); expected UTF-8 JSON lines") from None


def _opener(path: Path) -> Any:
    suffix = path.suffix.lower()
    if suffix == ".gz":
        import gzip

        return gzip.open
    if suffix == ".bz2":
        import bz2

        return bz2.open
    if suffix == ".xz":
        import lzma

        return lzma.open
    return open


def _parquet_rows(path: Path) -> Iterator[tuple[int, Any]]:
    try:
        import pyarrow.parquet as pq

        table = pq.read_table(path)
    except ImportError:
        raise UsageError(
            f"{path}: reading Parquet needs pyarrow: {install_hint('pyarrow', 'data')}"
        ) from None
    except Exception as exc:  # pyarrow raises several types for a file that is no Parquet
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"{path}: cannot read as Parquet ({first})") from None
    yield from enumerate(table.to_pylist(), start=1)


def _example(path: Path, row_number: int, row: dict[str, Any], fmt: str) -> Example:
    at = f"{path} row {row_number}"
    if fmt == PREFERENCE:
        return _pair(at, row_number, row)
    if fmt == MESSAGES:
        turns = _turns(at, MESSAGES, row.get(MESSAGES))
        last = max((i for i, (role, _) in enumerate(turns) if role == "assistant"), default=len(turns))
        return Example(row_number, tuple(turns[:last]), tuple(turns[last:]))
    if fmt == TEXT:
        return Example(row_number, (("", _text(at, TEXT, row.get(TEXT, _MISSING))),), ())
    prompt = row.get("prompt", _MISSING)
    if isinstance(prompt, list):  # TRL's conversational prompt/completion
        completion = row.get("completion", []) if fmt == PROMPT_COMPLETION else []
        return Example(
            row_number, tuple(_turns(at, "prompt", prompt)), tuple(_turns(at, "completion", completion))
        )
    completion_text = (
        _text(at, "completion", row.get("completion", _MISSING)) if fmt == PROMPT_COMPLETION else None
    )
    return Example(
        row_number,
        (("", _text(at, "prompt", prompt)),),
        (("", completion_text),) if completion_text is not None else (),
    )


_MISSING = object()


def _pair(at: str, row_number: int, row: dict[str, Any]) -> Example:
    """A preference pair, plain or conversational (all three parts alike), its prompt implicit
    in `chosen` and `rejected` when the row has none."""
    chosen, rejected, prompt = (row.get(k, _MISSING) for k in ("chosen", "rejected", "prompt"))
    if isinstance(chosen, list) or isinstance(rejected, list):
        chosen_turns = tuple(_turns(at, "chosen", chosen))
        rejected_turns = tuple(_turns(at, "rejected", rejected))
        if prompt is _MISSING:
            k = _implicit_prompt(chosen_turns, rejected_turns)
            return Example(row_number, chosen_turns[:k], chosen_turns[k:], rejected_turns[k:])
        if not isinstance(prompt, list):
            raise UsageError(
                f"{at}: 'prompt' is a {type(prompt).__name__}; expected a list of {{role, content}} "
                "objects, like 'chosen' and 'rejected'"
            )
        return Example(row_number, tuple(_turns(at, "prompt", prompt)), chosen_turns, rejected_turns)
    chosen_text, rejected_text = _text(at, "chosen", chosen), _text(at, "rejected", rejected)
    if prompt is _MISSING:
        k = _implicit_prompt(chosen_text, rejected_text)
        prompt, chosen_text, rejected_text = chosen_text[:k], chosen_text[k:], rejected_text[k:]
    return Example(
        row_number, (("", _text(at, "prompt", prompt)),), (("", chosen_text),), (("", rejected_text),)
    )


def _implicit_prompt(chosen: Sequence[object], rejected: Sequence[object]) -> int:
    """Where TRL's `extract_prompt` ends the prompt: the first place the two differ (a space
    before it left to the responses), or before the last element when neither differs."""
    n = min(len(chosen), len(rejected))
    k = next((i for i in range(n) if chosen[i] != rejected[i]), None)
    if k is None:
        return max(n - 1, 0)
    return k - 1 if k > 0 and chosen[k - 1] == " " else k


def _text(at: str, key: str, value: object) -> str:
    if value is _MISSING:
        raise UsageError(f"{at}: no {key!r}; expected {EXPECTED}, the same keys in every row")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise UsageError(f"{at}: {key!r} is a {type(value).__name__}; expected a string")
    return value


def _turns(at: str, key: str, value: object) -> list[Turn]:
    if value is _MISSING or value is None:
        raise UsageError(f"{at}: no {key!r}; expected a list of {{role, content}} objects in every row")
    if not isinstance(value, list):
        raise UsageError(
            f"{at}: {key!r} is a {type(value).__name__}; expected a list of {{role, content}} objects"
        )
    turns = []
    for message in value:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise UsageError(f"{at}: {key!r} holds {str(message)[:60]!r}; expected {{role, content}} objects")
        turns.append((message["role"], _content(at, message.get("content"))))
    return turns


def _content(at: str, content: object) -> str:
    """A message's text: a string, or the text parts of a list of typed parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    raise UsageError(f"{at}: a message's content is a {type(content).__name__}; expected a string")
