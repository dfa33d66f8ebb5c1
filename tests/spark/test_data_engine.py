"""The Spark `TableEngine` itself: a folder of part files is one split, numbered across partitions."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.data.engines import ROW
from trainmedic.spark._session import quiet_pandas_warnings
from trainmedic.spark.data import open_engine

from ..data.synth import clean_table

pytestmark = pytest.mark.slow


def test_a_folder_of_part_files_is_one_split_with_every_row_numbered_once(spark, tmp_path: Path) -> None:
    table = clean_table(500, 0)
    with quiet_pandas_warnings():
        spark.createDataFrame(table).repartition(4).write.parquet(str(tmp_path / "train"))
    assert len(list((tmp_path / "train").glob("part-*.parquet"))) == 4
    engine = open_engine({"train": str(tmp_path / "train")})
    try:
        assert engine.row_count("train") == 500
        (numbers,) = engine.runner.rows(  # type: ignore[attr-defined]
            f"SELECT count(DISTINCT {ROW}), min({ROW}), max({ROW}) FROM tm_train"
        )
        assert numbers == (500, 0, 499)
        sample = engine.sample("train", 50, seed=0)
        assert len(sample) == 50
        assert sample.index.is_monotonic_increasing
        assert sample.equals(engine.sample("train", 50, seed=0))  # seeded: the same rows again
    finally:
        engine.close()
    assert [t.name for t in spark.catalog.listTables() if t.name.startswith("tm_")] == []
