"""Read a table file (CSV, TSV, Parquet, JSONL) into a DataFrame, or fail with one line.

Everything a user can get wrong about a file becomes a `UsageError` that names the
file (and the line where it helps): missing, unreadable, empty, an unknown
format, or a delimited file whose lines do not agree on their delimiter.
"""

from __future__ import annotations

import csv
import itertools
from pathlib import Path

import pandas as pd

from trainmedic.errors import UsageError

TABLE_SUFFIXES = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".txt": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
}
_DELIMITERS = {"csv": ",", "tsv": "\t"}
_OTHER_DELIMITERS = (",", "\t", ";", "|")
_SNIFF_LINES = 2000


def table_format(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in (".gz", ".bz2", ".zst", ".xz") and len(suffixes) > 1:
        suffixes.pop()
    fmt = TABLE_SUFFIXES.get(suffixes[-1]) if suffixes else None
    if fmt is None:
        raise UsageError(
            f"{path}: unknown table format {path.suffix!r}; expected one of "
            f"{', '.join(sorted(TABLE_SUFFIXES))} (or an image folder with --images)"
        )
    return fmt


def read_table(path: str | Path) -> pd.DataFrame:
    """The file as a DataFrame with a 0-based RangeIndex (row numbers in findings)."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such file")
    if path.is_dir():
        raise UsageError(
            f"{path}: is a directory; expected a table file (--engine duckdb reads a folder of part "
            "files; --images an image folder)"
        )
    fmt = table_format(path)
    try:
        if fmt in _DELIMITERS:
            frame = _read_delimited(path, _DELIMITERS[fmt])
        elif fmt == "parquet":
            frame = pd.read_parquet(path)
        else:
            frame = pd.read_json(path, lines=fmt == "jsonl")
    except UsageError:
        raise
    except (OSError, ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise UsageError(f"{path}: cannot read as {fmt}: {_first_line(exc)}") from exc
    except Exception as exc:  # pyarrow raises its own types (ArrowInvalid...): same message
        raise UsageError(f"{path}: cannot read as {fmt}: {_first_line(exc)}") from exc
    if len(frame.columns) == 0 or len(frame) == 0:
        raise UsageError(f"{path}: has no rows; expected a non-empty {fmt} table")
    return frame.reset_index(drop=True)


def _read_delimited(path: Path, delimiter: str) -> pd.DataFrame:
    _check_delimiters(path, delimiter)
    try:
        return pd.read_csv(path, sep=delimiter, engine="pyarrow")
    except Exception:
        # the C engine names the offending line; pyarrow's messages are less precise
        return pd.read_csv(path, sep=delimiter, low_memory=False)


def _check_delimiters(path: Path, delimiter: str) -> None:
    """Lines that disagree on the number of fields, where another delimiter explains it."""
    try:
        with path.open(newline="", encoding="utf-8", errors="replace") as handle:
            head = list(itertools.islice(handle, _SNIFF_LINES))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if not head or not head[0].strip():
        raise UsageError(f"{path}: is empty; expected a header line")
    rows = list(csv.reader(head, delimiter=delimiter))
    width = len(rows[0])
    if width == 1:
        other = _dominant_other(head[0], delimiter)
        if other is not None and len(head) > 1:
            raise UsageError(
                f"{path}: line 1 is delimited by {other!r}, not {delimiter!r} as its suffix says; "
                "rename the file or convert it"
            )
    for number, row in enumerate(rows[1:], start=2):
        if not row or len(row) == width:
            continue
        line = head[number - 1]
        other = _dominant_other(line, delimiter)
        if other is not None:
            raise UsageError(
                f"{path}: mixed delimiters: line {number} uses {other!r} where line 1 uses "
                f"{delimiter!r}; use one delimiter throughout"
            )
        raise UsageError(f"{path}: line {number} has {len(row)} fields, the header has {width}")


def _dominant_other(line: str, delimiter: str) -> str | None:
    counts = {d: line.count(d) for d in _OTHER_DELIMITERS if d != delimiter}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] > line.count(delimiter) else None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
