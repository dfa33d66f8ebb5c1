"""The Spark backend of `check data`: each split a Spark relation, each check question a Spark job.

`open_engine` reads the inputs (Parquet, CSV/TSV, JSON lines: files, folders of files or
cluster URLs, or Spark DataFrames already in hand), registers each split as the temp
view `tm_<split>` with `__tm_row`, its row number in read order, and returns the
`SqlTableEngine` of `trainmedic.data.engines` with the Spark SQL dialect: the queries are
the ones DuckDB answers too, written once there.

Where the work happens: reading, hashing rows, joins across splits and every aggregation
run on the executors; the driver receives counts, at most a few dozen example ids or
values per question, and the seeded samples the model-based checks score
(`TableEngine.sample`, converted to pandas through Arrow).

Row numbers follow the read order, so examples name the same rows as the pandas engine:
`monotonically_increasing_id` numbers rows within each partition, one small job counts
the rows of each partition, and the running totals of those counts (a literal array in the
query plan, indexed by partition) turn the pair into a 0-based row number without moving
or joining any row. The numbering is stable because a file scan splits into the same
partitions every time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pandas as pd

from trainmedic.data.engines import ROW, SPARK, SqlTableEngine, TableEngine
from trainmedic.data.engines._choice import is_spark_frame
from trainmedic.data.readers import pandas_index_columns, table_format
from trainmedic.errors import UsageError
from trainmedic.spark._session import adopt, arrow_enabled, first_line, quiet_pandas_warnings, spark_session

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SparkInput = Any  # str | Path | pyspark.sql.DataFrame (pyspark is imported lazily)

_PARTITION_BITS = 33  # monotonically_increasing_id: partition index << 33 | row within the partition
_DELIMITERS = {"csv": ",", "tsv": "\t"}
_INDEX_LEVELS = 8  # unnamed index levels of a pandas-written file read from a cluster URL


def open_engine(
    inputs: Mapping[str, SparkInput],
    *,
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
) -> TableEngine:
    """A `TableEngine` over these splits (name -> path or Spark DataFrame), in one SparkSession:
    the one the DataFrames belong to, else the active one, else a new one on `master`."""
    for value in inputs.values():
        if not is_spark_frame(value):
            table_kind(str(value))  # a missing file or an unknown format fails before Spark starts
    session = _session_for([v for v in inputs.values() if is_spark_frame(v)], master, conf)
    runner = SparkRunner(session)
    try:
        for split, value in inputs.items():
            runner.register(SPARK.relation(split), numbered_split(session, split, value), cache=False)
    except BaseException:
        runner.close()
        raise
    return SqlTableEngine("spark", SPARK, runner, list(inputs))


def _session_for(frames: list[DataFrame], master: str | None, conf: Mapping[str, str] | None) -> SparkSession:
    """The DataFrames' own session (one for all), else the active or a new one."""
    if not frames:
        return spark_session(master, conf)
    session = frames[0].sparkSession
    if any(frame.sparkSession is not session for frame in frames[1:]):
        raise UsageError("the Spark DataFrames belong to different SparkSessions; expected one session")
    adopt(session, master, conf)
    return session


def numbered_split(session: SparkSession, split: str, value: SparkInput) -> DataFrame:
    """The split as a Spark DataFrame with `__tm_row`; a file Spark cannot read, or no rows, is
    one line naming the file (or the split, for a DataFrame)."""
    if is_spark_frame(value):
        frame, rows = with_row_numbers(value)
        if rows == 0:
            raise UsageError(f"{split}: the split is empty; expected at least one row")
        return frame
    text = str(value)
    fmt = table_kind(text)
    try:
        frame, rows = with_row_numbers(read_spark_table(session, text, fmt))
    except Exception as exc:  # AnalysisException, SparkException...: the file, not our code
        raise UsageError(f"{text}: cannot read as {fmt}: {first_line(exc)}") from exc
    if rows == 0 or not frame.columns:
        raise UsageError(f"{text}: has no rows; expected a non-empty {fmt} table")
    return frame


def read_spark_table(session: SparkSession, text: str, fmt: str) -> DataFrame:
    """Spark's reader for the format (Parquet footers are read here: a bad file fails here)."""
    if fmt in _DELIMITERS:
        return session.read.csv(text, header=True, inferSchema=True, sep=_DELIMITERS[fmt])
    if fmt == "parquet":
        frame = session.read.parquet(text)
        index = [c for c in _pandas_index_columns(text) if c in frame.columns]
        return frame.drop(*index) if index else frame
    return session.read.json(text, multiLine=fmt == "json")


def _pandas_index_columns(text: str) -> list[str]:
    """The columns pandas wrote from a frame's index, which `pd.read_parquet` (the pandas
    engine) makes the index: from the footers' pandas metadata where the files are local,
    else by the names pandas gives an unnamed index (`__index_level_0__`)."""
    local = _local_path(text)
    if local is None:
        return [f"__index_level_{level}__" for level in range(_INDEX_LEVELS)]
    if local.is_file():
        return pandas_index_columns([local])
    parts = (p for p in local.rglob("*") if p.suffix.lower() in (".parquet", ".pq") and p.is_file())
    return pandas_index_columns(p for p in parts if not p.name.startswith((".", "_")))


def table_kind(text: str) -> str:
    """The format of an input: a local folder is a Parquet dataset (the layout Spark writes);
    a file or URL by its suffix. A local path must exist; a URL is checked when Spark reads it."""
    local = _local_path(text)
    if local is not None and not local.exists():
        raise UsageError(f"{text}: no such file or folder")
    if local is not None and local.is_dir():
        return "parquet"
    return table_format(Path(urlsplit(text).path))


def with_row_numbers(frame: DataFrame) -> tuple[DataFrame, int]:
    """`frame` plus `__tm_row`, 0-based in read order (see the module docstring), and its rows."""
    from pyspark.sql import functions as F

    tagged = frame.withColumn("__tm_id", F.monotonically_increasing_id())
    partition = F.shiftright(F.col("__tm_id"), _PARTITION_BITS)
    counts = sorted(
        (int(p), int(n))
        for p, n in tagged.groupBy(partition.alias("p")).count().collect()  # one small job
    )
    sizes = dict(counts)
    starts = list(accumulate((sizes.get(p, 0) for p in range(max(sizes, default=0) + 1)), initial=0))
    start = F.element_at(F.array(*[F.lit(s) for s in starts[:-1] or [0]]), (partition + 1).cast("int"))
    within = F.col("__tm_id").bitwiseAND((1 << _PARTITION_BITS) - 1)
    numbered = tagged.withColumn(ROW, start + within).drop("__tm_id")
    return numbered, sum(n for _, n in counts)


@contextlib.contextmanager
def job_failures() -> Iterator[None]:
    """A Spark job that fails on the data (a corrupt file found mid-scan, a lost executor)
    is one line naming Spark's reason; an AnalysisException is a query's fault and stays one."""
    from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]
    from pyspark.errors import AnalysisException, PySparkException

    try:
        yield
    except AnalysisException:
        raise
    except (PySparkException, Py4JJavaError) as exc:
        raise UsageError(f"--engine spark: a Spark job failed: {first_line(exc)}") from exc


class SparkRunner:
    """`SqlRunner` over one SparkSession: the SQL runs as Spark jobs, results come back small."""

    def __init__(self, session: SparkSession) -> None:
        self.session = session
        self._views: list[str] = []
        self._cached: list[DataFrame] = []

    def register(self, name: str, frame: DataFrame, *, cache: bool) -> None:
        if cache:
            frame = frame.persist()
            self._cached.append(frame)
        frame.createOrReplaceTempView(name)
        self._views.append(name)

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        with job_failures():
            return [tuple(row) for row in self.session.sql(sql).collect()]

    def frame(self, sql: str) -> pd.DataFrame:
        with job_failures(), quiet_pandas_warnings(), arrow_enabled(self.session):
            frame: pd.DataFrame = self.session.sql(sql).toPandas()
        return frame

    def materialize(self, name: str, sql: str) -> None:
        """Hash relations are read by several questions: kept on the executors once computed."""
        self.register(name, self.session.sql(sql), cache=True)

    def column_types(self, relation: str) -> list[tuple[str, str]]:
        return [(str(c), str(t)) for c, t in self.session.table(relation).dtypes]

    def close(self) -> None:
        for frame in self._cached:
            frame.unpersist()
        for name in self._views:
            self.session.catalog.dropTempView(name.strip(SPARK.quote_char))
        self._cached.clear()
        self._views.clear()


def _local_path(text: str) -> Path | None:
    """The local file a path names (no scheme, or file:), None for a cluster URL."""
    scheme = urlsplit(text).scheme
    if scheme == "file":
        return Path(urlsplit(text).path)
    if scheme and len(scheme) > 1:  # a Windows drive letter is not a scheme
        return None
    return Path(text)
