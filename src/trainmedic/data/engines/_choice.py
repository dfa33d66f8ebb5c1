"""Which engine checks these inputs, and with how much memory.

`auto` keeps pandas, the engine every check was written for, while the tables fit the
memory budget with room for its working copies; beyond it DuckDB streams them from
disk. The size of a table in pandas is judged without reading it: for Parquet, the
footers' row counts x columns x 8 bytes or the uncompressed size, whichever is larger;
for text formats, the file size (parsed numbers take about as much room as their text).
pandas holds a table about three times over at its peak (pyarrow's buffers while
reading, the frame, the per-row hashes and samples), so a table fits when three times
its size is within the budget (a folder of part files: the sum of its files). The budget is
`--memory-budget`, else the TRAINMEDIC_MEMORY_BUDGET variable, else half the memory
available now (at least `_budget.FLOOR`); a budget given below `_budget.FLOOR` (512 MiB) is
a usage error, as the interpreter and its libraries alone take half of it. `_budget` shares
the budget between DuckDB and Python.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from trainmedic.data.engines._budget import FLOOR
from trainmedic.errors import UsageError

ENGINES = ("auto", "pandas", "duckdb", "spark")
BUDGET_VARIABLE = "TRAINMEDIC_MEMORY_BUDGET"
PANDAS_WORKING_COPIES = 3
_UNITS = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(text: str, *, option: str = "--memory-budget") -> int:
    """'2GiB', '1.5g', '512MB', '1000000' -> bytes (binary units), or a usage error."""
    match = _SIZE.match(text)
    if not match or float(match.group(1)) <= 0:
        raise UsageError(f"{option} {text!r}: expected a size such as 2GiB, 512MB or a number of bytes")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def memory_budget(explicit: str | int | None) -> int:
    """The bytes the check may use (see the module docstring)."""
    if isinstance(explicit, int):
        return _at_least_floor(explicit, "--memory-budget", f"{explicit} bytes")
    if explicit is not None:
        return _at_least_floor(parse_size(explicit), "--memory-budget", repr(explicit))
    if os.environ.get(BUDGET_VARIABLE):
        text = os.environ[BUDGET_VARIABLE]
        return _at_least_floor(parse_size(text, option=BUDGET_VARIABLE), BUDGET_VARIABLE, repr(text))
    import psutil

    return max(int(psutil.virtual_memory().available // 2), FLOOR)


def _at_least_floor(budget: int, option: str, given: str) -> int:
    if budget < FLOOR:
        raise UsageError(
            f"{option} {given}: expected at least 512MiB (the interpreter and its libraries "
            "alone take about 250 MiB)"
        )
    return budget


def is_spark_frame(value: object) -> bool:
    cls = type(value)
    return cls.__name__ == "DataFrame" and cls.__module__.startswith("pyspark.sql")


def choose_engine(requested: str, inputs: Mapping[str, object], budget: int) -> str:
    """The engine that checks `inputs` ('pandas', 'duckdb' or 'spark')."""
    if requested not in ENGINES:
        raise UsageError(f"--engine {requested!r}: expected one of {', '.join(ENGINES)}")
    spark = [name for name, value in inputs.items() if is_spark_frame(value)]
    if spark and requested not in ("auto", "spark"):
        raise UsageError(
            f"{spark[0]} is a Spark DataFrame: the {requested} engine cannot read it; use engine='spark'"
        )
    if spark:
        return "spark"
    if requested != "auto":
        return requested
    paths = [Path(v) for v in inputs.values() if isinstance(v, (str, Path))]
    if len(paths) < len(inputs):
        return "pandas"  # frames already in memory
    needed = PANDAS_WORKING_COPIES * sum(pandas_size(p) for p in paths)
    return "pandas" if needed <= budget else "duckdb"


def pandas_size(path: Path) -> int:
    """About how many bytes the table takes in pandas (0 for what does not exist: the reader
    names a missing file)."""
    if not path.exists():
        return 0
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(_file_size(f) for f in files)


def _file_size(path: Path) -> int:
    if path.suffix.lower() not in (".parquet", ".pq"):
        return path.stat().st_size
    try:
        import pyarrow.parquet as pq

        meta = pq.ParquetFile(path).metadata
    except Exception:  # unreadable: the engine that opens it names the file
        return path.stat().st_size
    uncompressed = sum(int(meta.row_group(i).total_byte_size) for i in range(meta.num_row_groups))
    return max(uncompressed, int(meta.num_rows) * int(meta.num_columns) * 8)
