"""DuckDB on one machine: Parquet/CSV/JSONL files or folders read lazily, spilled to disk.

Nothing is loaded into memory up front: each Parquet split is a view over `read_parquet`,
each text split a table in a database file in a temporary folder, where the row hashes the
checks share are written once too, and where DuckDB spills when a join or aggregate
outgrows `memory_limit`. So the peak memory follows the limit, not the table. The limit,
the threads and whether a Parquet row group is read at once come from the budget's
`Shares` (`_budget`). Insertion order is kept only while CSV/JSON files are numbered in
read order, as they are parsed once into the database file (every check then reads that,
not the text).

Row numbers (`__tm_row`) for Parquet come from each file's own row numbers plus the rows
of the files before it (from the Parquet footers), so they are exact and the scan stays
parallel; CSV and JSON are numbered in read order, and CSV columns are named as pandas
names them ('Unnamed: 0' for the index `to_csv` writes). The columns pandas wrote from a frame's
index are left out, as `pd.read_parquet` makes them the index (`readers.pandas_index_columns`).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from trainmedic.data.engines._budget import Shares
from trainmedic.data.engines._sql import DUCKDB, ROW, SqlTableEngine
from trainmedic.data.readers import header_names, pandas_index_columns, table_files
from trainmedic.errors import UsageError

_READERS = {
    "parquet": "read_parquet({files}, filename = true, file_row_number = true)",
    "csv": "read_csv({files}, delim = ',', header = true, {typing})",
    "tsv": "read_csv({files}, delim = '\t', header = true, {typing})",
    "jsonl": "read_json_auto({files}, format = 'newline_delimited')",
    "json": "read_json_auto({files})",
}


# Types as pandas (pyarrow) reads them: from every line, not the first 20,480, and
# 'yes'/'no' stay text rather than DuckDB's booleans.
_CSV_TYPING = "sample_size = -1, auto_type_candidates = ['BIGINT', 'DOUBLE', 'TIMESTAMP', 'VARCHAR']"


class DuckDBRunner:
    """Executes the engine's SQL on one DuckDB connection; every DuckDB error becomes one line."""

    def __init__(self, memory: Shares, workdir: Path) -> None:
        import duckdb

        self._error = duckdb.Error
        self.workdir = workdir
        self.con = duckdb.connect(str(workdir / "trainmedic.duckdb"))
        spill = workdir / "spill"
        spill.mkdir(exist_ok=True)
        self.con.execute(f"SET memory_limit = '{memory.duckdb // 2**20}MiB'")
        self.con.execute(f"SET temp_directory = '{_text(str(spill))}'")
        self.con.execute(f"SET threads = {memory.threads}")
        self.memory = memory
        self.context = ""

    def execute(self, sql: str) -> Any:
        try:
            return self.con.execute(sql)
        except self._error as exc:
            raise self._usage_error(exc) from exc

    def _usage_error(self, exc: Exception) -> UsageError:
        if "Out of Memory" in str(exc):
            return UsageError(
                f"duckdb ran out of its memory limit ({self.memory.duckdb / 2**20:,.0f} MiB of a "
                f"{self.memory.budget / 2**20:,.0f} MiB budget) and could not spill; raise --memory-budget"
            )
        named = re.search(r"^\s*file = (.+)$", str(exc), re.MULTILINE)
        context = f"{named.group(1).strip()}: " if named and not self.context else self.context
        return UsageError(f"{context}cannot read: {_first_line(exc)}")

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        return list(self.execute(sql).fetchall())

    def frame(self, sql: str) -> pd.DataFrame:
        try:
            table = self.con.sql(sql).to_arrow_table()
        except self._error as exc:
            raise self._usage_error(exc) from exc
        frame: pd.DataFrame = table.to_pandas()
        return frame

    def materialize(self, name: str, sql: str) -> None:
        self.execute(f'CREATE OR REPLACE TABLE "{name}" AS {sql}')

    def column_types(self, relation: str) -> list[tuple[str, str]]:
        return [(str(row[0]), str(row[1])) for row in self.rows(f"DESCRIBE {relation}")]

    def close(self) -> None:
        self.con.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


def open_duckdb(
    inputs: Mapping[str, str | Path], *, memory: Shares, temp_dir: str | None = None
) -> SqlTableEngine:
    """A `TableEngine` over these files within `memory`; bad input raises `UsageError`
    naming the file."""
    workdir = Path(tempfile.mkdtemp(prefix="trainmedic-duckdb-", dir=temp_dir))
    runner = DuckDBRunner(memory, workdir)
    try:
        found = {split: table_files(Path(source)) for split, source in inputs.items()}
        runner.execute("SET preserve_insertion_order = false")
        runner.execute("SET disable_parquet_prefetching = true")  # until the row groups are known
        largest = 0
        for split, source in inputs.items():
            files, fmt = found[split]
            runner.context = f"{source}: "
            if fmt == "parquet":  # Parquet carries its own row numbers: read where it lies
                largest = max(largest, _largest_row_group(runner, files))
                runner.execute(f'CREATE VIEW "tm_{split}" AS {_numbered(runner, files, fmt)}')
            else:  # text rows are numbered in read order: parsed once, in order, to the database
                runner.execute("SET preserve_insertion_order = true")
                runner.execute(f'CREATE TABLE "tm_{split}" AS {_numbered(runner, files, fmt)}')
                runner.execute("SET preserve_insertion_order = false")
            if not runner.rows(f'SELECT 1 FROM "tm_{split}" LIMIT 1'):
                raise UsageError(f"{source}: has no rows; expected a non-empty {fmt} table")
        runner.context = ""
        prefetch = memory.prefetch_row_groups(largest)
        runner.execute(f"SET disable_parquet_prefetching = {str(not prefetch).lower()}")
        columns = max(len(runner.column_types(f'"tm_{split}"')) for split in inputs)
    except BaseException:
        runner.close()
        raise
    engine = SqlTableEngine("duckdb", DUCKDB, runner, list(inputs))
    engine.sample_rows = memory.sample_rows(columns, len(inputs))
    return engine


def _largest_row_group(runner: DuckDBRunner, files: list[Path]) -> int:
    """Bytes of the largest row group of these Parquet files, as stored."""
    listed = "[" + ", ".join(f"'{_text(str(f))}'" for f in files) + "]"
    sizes = (
        f"SELECT sum(total_compressed_size) AS s FROM parquet_metadata({listed}) "
        "GROUP BY file_name, row_group_id"
    )
    return int(runner.rows(f"SELECT coalesce(max(s), 0) FROM ({sizes}) AS g")[0][0])


def _numbered(runner: DuckDBRunner, files: list[Path], fmt: str) -> str:
    """SELECT every column of the files plus `__tm_row`, the row number in read order."""
    listed = "[" + ", ".join(f"'{_text(str(f))}'" for f in files) + "]"
    source = _READERS[fmt].format(files=listed, typing=_CSV_TYPING)
    if fmt != "parquet":
        columns = _pandas_names(runner, files, fmt, source)
        return f"SELECT row_number() OVER () - 1 AS {ROW}, {columns} FROM {source}"
    counts = runner.rows(f"SELECT file_name, num_rows FROM parquet_file_metadata({listed})")
    rows_of = {str(name): int(n) for name, n in counts}
    offsets, total = [], 0
    for f in files:
        offsets.append(f"WHEN '{_text(str(f))}' THEN {total}")
        total += rows_of.get(str(f), 0)
    offset = f"(CASE filename {' '.join(offsets)} END)" if len(files) > 1 else "0"
    present = {name for name, _ in runner.column_types(f"(SELECT * FROM {source} LIMIT 0)")}
    index = [c for c in pandas_index_columns(files) if c in present]
    left_out = ", ".join(["filename", "file_row_number", *(DUCKDB.quote(c) for c in index)])
    return f"SELECT CAST(file_row_number + {offset} AS BIGINT) AS {ROW}, * EXCLUDE ({left_out}) FROM {source}"


def _pandas_names(runner: DuckDBRunner, files: list[Path], fmt: str, source: str) -> str:
    """The select list that names a delimited file's columns as pandas does ('Unnamed: 0' for
    the empty header field of a pandas index, where DuckDB says 'column00')."""
    if fmt not in ("csv", "tsv"):
        return "*"
    names = [name for name, _ in runner.column_types(f"(SELECT * FROM {source} LIMIT 0)")]
    wanted = header_names(files[0])
    if len(wanted) != len(names) or wanted == names:
        return "*"
    return ", ".join(f"{DUCKDB.quote(n)} AS {DUCKDB.quote(w)}" for n, w in zip(names, wanted, strict=True))


def _text(value: str) -> str:
    return value.replace("'", "''")


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
