"""Open the engine `_choice.choose_engine` chose; a missing package or backend is one line."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path

from trainmedic.data.engines._budget import shares
from trainmedic.data.engines._protocol import TableEngine
from trainmedic.errors import UsageError, install_hint


def open_table_engine(
    kind: str,
    inputs: Mapping[str, object],
    *,
    budget: int,
    spark_master: str | None = None,
    spark_conf: Mapping[str, str] | None = None,
) -> TableEngine:
    """A `TableEngine` of kind 'duckdb' or 'spark' over `inputs` (split name -> source)."""
    if kind == "duckdb":
        return _open_duckdb(inputs, budget)
    if kind == "spark":
        return _open_spark(inputs, spark_master, dict(spark_conf or {}))
    raise ValueError(f"no table engine {kind!r}")


def _open_duckdb(inputs: Mapping[str, object], budget: int) -> TableEngine:
    paths: dict[str, str | Path] = {}
    for name, value in inputs.items():
        if not isinstance(value, (str, Path)):
            raise UsageError(
                f"{name}: the duckdb engine reads files (Parquet, CSV, JSONL); got a {type(value).__name__}"
            )
        paths[name] = value
    if importlib.util.find_spec("duckdb") is None:
        raise UsageError(f"--engine duckdb needs duckdb: {install_hint('duckdb', 'bigdata')}")
    from trainmedic.data.engines.duckdb_engine import open_duckdb

    return open_duckdb(paths, memory=shares(budget))


def _open_spark(inputs: Mapping[str, object], master: str | None, conf: dict[str, str]) -> TableEngine:
    try:
        spark_data = importlib.import_module("trainmedic.spark.data")  # pyspark only when asked for
    except ImportError as exc:
        if exc.name == "pyspark" or (exc.name or "").startswith("pyspark."):
            raise UsageError(f"--engine spark needs pyspark: {install_hint('pyspark', 'spark')}") from exc
        raise UsageError(
            "--engine spark: this trainmedic has no Spark data engine (trainmedic.spark.data); "
            "use --engine duckdb or auto"
        ) from exc
    engine: TableEngine = spark_data.open_engine(inputs, master=master, conf=conf)
    return engine
