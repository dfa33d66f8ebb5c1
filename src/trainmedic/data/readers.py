"""Read a table file (CSV, TSV, Parquet, JSONL), or a folder of part files, into a DataFrame,
or fail with one line.

Everything a user can get wrong about a file becomes a `UsageError` that names the
file (and the line where it helps): missing, unreadable, empty, an unknown
format, or a delimited file whose lines do not agree on their delimiter.
"""

from __future__ import annotations

import csv
import itertools
from collections.abc import Iterable
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


def table_files(path: Path) -> tuple[list[Path], str]:
    """The files of one input (a file, or every table file under a folder, in file name order,
    without the hidden and `_`-prefixed files writers leave beside the parts) and their format."""
    if not path.exists():
        raise UsageError(f"{path}: no such file or folder")
    if path.is_file():
        return [path], table_format(path)
    files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith((".", "_")))
    formats = {table_format(p) for p in files if p.suffix}
    if not files or len(formats) != 1:
        found = ", ".join(sorted(formats)) or "none"
        raise UsageError(f"{path}: expected a folder of table files of one format (found: {found})")
    return files, formats.pop()


def pandas_index_columns(files: Iterable[Path]) -> list[str]:
    """The columns of Parquet files that pandas wrote from its index (`__index_level_0__` for a
    filtered or concatenated frame, or the index's name), as the files' pandas metadata lists
    them: `pd.read_parquet` makes them the index, so every engine leaves them out of the
    table. Only the footers are read; a file without that metadata adds none."""
    import pyarrow.parquet as pq

    found: list[str] = []
    for path in files:
        try:
            metadata = pq.read_schema(path).pandas_metadata or {}
        except Exception:  # unreadable: the engine that reads it names the file
            continue
        for column in metadata.get("index_columns", []):
            if isinstance(column, str) and column not in found:  # a RangeIndex is no column
                found.append(column)
    return found


def header_names(path: Path) -> list[str]:
    """A delimited file's column names as pandas gives them: an empty header field (the index
    `to_csv` writes by default) is 'Unnamed: 0', a repeated name 'a.1' (one line read)."""
    try:
        return [str(c) for c in pd.read_csv(path, sep=_DELIMITERS[table_format(path)], nrows=0).columns]
    except Exception:  # unreadable: the engine that reads it names the file
        return []


def read_table(path: str | Path) -> pd.DataFrame:
    """The file (or folder of part files, one after the other in file name order) as a
    DataFrame with a 0-based RangeIndex (row numbers in findings)."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such file")
    files, _ = table_files(path)
    frames = [_read_file(f) for f in files]
    frame = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    if len(frame.columns) == 0 or len(frame) == 0:
        raise UsageError(f"{path}: has no rows; expected a non-empty {table_format(files[0])} table")
    return frame.reset_index(drop=True)


def _read_file(path: Path) -> pd.DataFrame:
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
    return frame


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
