"""Engines that answer the data checks' questions where the tables do not fit in pandas.

`TableEngine` (`_protocol`) is the contract; `_sql.SqlTableEngine` answers it with SQL
written once for every SQL engine, a `Dialect` holding what they spell apart. DuckDB
(`duckdb_engine`) streams Parquet/CSV on one machine; Spark is reached only through
`trainmedic.spark.data.open_engine(inputs, *, master, conf) -> TableEngine`, imported
lazily, so pyspark is needed only when `--engine spark` is asked for.
"""

from __future__ import annotations

from trainmedic.data.engines._checks import (
    EXACT_CHECKS,
    SAMPLE_ROWS,
    EngineData,
    engine_summary,
    exact_identifiers,
    sampled_dataset,
    with_sample_sizes,
)
from trainmedic.data.engines._choice import ENGINES, choose_engine, memory_budget, parse_size
from trainmedic.data.engines._open import open_table_engine
from trainmedic.data.engines._protocol import (
    KINDS,
    Conflicts,
    Duplicates,
    Matches,
    Moments,
    SharedValues,
    TableEngine,
)
from trainmedic.data.engines._sql import DUCKDB, ROW, SPARK, Dialect, SqlRunner, SqlTableEngine

__all__ = [
    "DUCKDB",
    "ENGINES",
    "EXACT_CHECKS",
    "KINDS",
    "ROW",
    "SAMPLE_ROWS",
    "SPARK",
    "Conflicts",
    "Dialect",
    "Duplicates",
    "EngineData",
    "Matches",
    "Moments",
    "SharedValues",
    "SqlRunner",
    "SqlTableEngine",
    "TableEngine",
    "choose_engine",
    "engine_summary",
    "exact_identifiers",
    "memory_budget",
    "open_table_engine",
    "parse_size",
    "sampled_dataset",
    "with_sample_sizes",
]
