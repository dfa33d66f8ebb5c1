"""`trainmedic.data.check` on Spark DataFrames: the session they belong to runs the checks."""

from __future__ import annotations

import pandas as pd
import pytest

from trainmedic.data import check, check_report
from trainmedic.errors import UsageError
from trainmedic.spark._session import quiet_pandas_warnings

from ..data.engine_cases import check_options, duplicates, projection, split_overlap

pytestmark = [pytest.mark.slow, pytest.mark.heavy]


def spark_frame(spark, frame: pd.DataFrame):
    with quiet_pandas_warnings():
        return spark.createDataFrame(frame)


def test_spark_dataframes_give_the_pandas_findings(spark) -> None:
    case = split_overlap()
    options = check_options(case)
    frames = {name: spark_frame(spark, frame) for name, frame in case.splits.items()}
    on_spark = check_report(**frames, **options)  # engine 'auto' picks Spark for Spark DataFrames
    pandas = check_report(**case.splits, **options, engine="pandas")
    assert "DAT001" in [f.code for f in on_spark.findings]
    assert projection(on_spark.findings) == projection(pandas.findings)
    views = [t.name for t in spark.catalog.listTables() if t.name.startswith("tm_")]
    assert views == []  # the check leaves the user's session as it found it


def test_spark_dataframe_with_an_id_column_names_rows_by_it(spark) -> None:
    case = duplicates()
    train = case.splits["train"].assign(order_id=lambda f: [f"o{i}" for i in range(len(f))])
    findings = check(spark_frame(spark, train), label="y", id="order_id", label_noise=False)
    (found,) = [f for f in findings if f.code == "DAT007"]
    assert found.evidence["duplicate_rows"] == 40
    assert found.evidence["example_rows"][:3] == ["o1200", "o1201", "o1202"]


def test_an_empty_spark_dataframe_is_one_line(spark) -> None:
    empty = spark.createDataFrame([], "x double, y long")
    with pytest.raises(UsageError, match=r"^train: the split is empty; expected at least one row$"):
        check(empty, label="y")


def test_a_master_other_than_the_dataframes_is_refused(spark) -> None:
    frame = spark_frame(spark, split_overlap().splits["train"])
    with pytest.raises(UsageError, match=r"--spark-master spark://elsewhere:7077: this process already runs"):
        check(frame, label="y", spark_master="spark://elsewhere:7077")
