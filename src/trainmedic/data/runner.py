"""`trainmedic.data.check`: validate the inputs, build the shared hashes once, run every check.

The checks are independent functions `check(Dataset) -> list[Finding]`; the order
below is the catalogue order. Nothing is written anywhere: the caller renders.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeAlias

import numpy as np
import pandas as pd

from trainmedic.data import _identifiers as identifiers
from trainmedic.data import _leakage as leakage
from trainmedic.data import _parity as parity
from trainmedic.data import _preprocessing as preprocessing
from trainmedic.data import _quality as quality
from trainmedic.data import engines, noise
from trainmedic.data._columns import Roles, validate_roles
from trainmedic.data._context import Dataset, Split
from trainmedic.data.readers import read_table
from trainmedic.data.summary import DataSummary, summarize
from trainmedic.errors import UsageError, install_hint
from trainmedic.findings import Finding, sort_findings
from trainmedic.registry import modules_for

Check = Callable[[Dataset], list[Finding]]
TableLike: TypeAlias = "pd.DataFrame | str | Path | Any"  # Any: a pyspark.sql.DataFrame

#: Where the pandas checks live: a data check's is the function named after its slug.
_COLLECTORS = (leakage, quality, parity, noise, preprocessing, identifiers)


def pandas_check(finding: ModuleType) -> Check:
    """A data check's pandas code: its finding file's own `check_tables(data)` when the finding
    measures the tables itself, else the function of `trainmedic.data` named after its slug."""
    own = getattr(finding, "check_tables", None)
    if callable(own):
        return own  # type: ignore[no-any-return]
    name = finding.SPEC.slug.replace("-", "_")
    for module in _COLLECTORS:
        found = getattr(module, name, None)
        if callable(found):
            return found  # type: ignore[no-any-return]
    raise LookupError(f"{finding.SPEC.code} is declared a data check, but nothing named {name}(data) runs it")


#: The data checks, by slug, in catalogue order: the findings declared `decided_in=("data check", ...)`.
CHECKS: Mapping[str, Check] = {f.SPEC.slug: pandas_check(f) for f in modules_for("data check")}


@dataclass(frozen=True, slots=True)
class DataReport:
    """What `check data` found: the summary of the splits and the findings."""

    summary: DataSummary
    findings: list[Finding]


def check(
    train: TableLike,
    val: TableLike | None = None,
    test: TableLike | None = None,
    serving: TableLike | None = None,
    *,
    label: str | None,
    group: str | None = None,
    time: str | None = None,
    id: str | None = None,
    ignore: Iterable[str] = (),
    label_noise: bool = True,
    skip: Iterable[str] = (),
    engine: str = "auto",
    memory_budget: str | int | None = None,
    spark_master: str | None = None,
    spark_conf: Mapping[str, str] | None = None,
) -> list[Finding]:
    """Every DAT finding for these splits, worst first. See `check_report` for the summary too."""
    return check_report(
        train,
        val,
        test,
        serving,
        label=label,
        group=group,
        time=time,
        id=id,
        ignore=ignore,
        label_noise=label_noise,
        skip=skip,
        engine=engine,
        memory_budget=memory_budget,
        spark_master=spark_master,
        spark_conf=spark_conf,
    ).findings


def check_report(
    train: TableLike,
    val: TableLike | None = None,
    test: TableLike | None = None,
    serving: TableLike | None = None,
    *,
    label: str | None,
    group: str | None = None,
    time: str | None = None,
    id: str | None = None,
    ignore: Iterable[str] = (),
    label_noise: bool = True,
    skip: Iterable[str] = (),
    engine: str = "auto",
    memory_budget: str | int | None = None,
    spark_master: str | None = None,
    spark_conf: Mapping[str, str] | None = None,
) -> DataReport:
    """The summary and the findings; raises `UsageError` for bad input before any check runs.

    `engine`: 'pandas' loads the splits; 'duckdb' streams files from disk; 'spark' runs the
    checks as Spark jobs (`spark_master`, `spark_conf`); 'auto' (the default) picks pandas
    while the files fit `memory_budget` (bytes or '2GiB'; see `engines._choice`), DuckDB
    beyond, and Spark for Spark DataFrames.
    """
    roles = Roles(label=label, group=group, time=time, id=id, ignore=tuple(ignore))
    inputs = {
        name: value
        for name, value in (("train", train), ("val", val), ("test", test), ("serving", serving))
        if value is not None
    }
    require_data_extra()
    skipped = set(skip)
    unknown = skipped - set(CHECKS)
    if unknown:
        raise UsageError(f"--skip {sorted(unknown)[0]!r} is not a check; expected one of {sorted(CHECKS)}")
    if not label_noise:
        skipped.add("label-noise")
    budget = engines.memory_budget(memory_budget)
    chosen = engines.choose_engine(engine, inputs, budget)
    if chosen == "pandas":
        data = build_dataset(
            roles, [(name, _as_frame(value, name)) for name, value in inputs.items()], skipped
        )
        findings = run_checks(data, skipped)  # before the summary: checks add notes
        return DataReport(summarize(data), findings)
    table_engine = engines.open_table_engine(
        chosen, inputs, budget=budget, spark_master=spark_master, spark_conf=spark_conf
    )
    try:
        table_engine.identify_rows_by(roles.id)

        def data_of(frames: list[tuple[str, pd.DataFrame]]) -> Dataset:
            def identify(frame: pd.DataFrame, features: list[str]) -> dict[str, float]:
                return engines.exact_identifiers(table_engine, frame, features)

            return build_dataset(roles, frames, skipped, identify=identify)

        ctx = engines.sampled_dataset(table_engine, data_of)
        findings = run_checks(ctx.data, skipped, ctx)
        return DataReport(engines.engine_summary(ctx), findings)
    finally:
        table_engine.close()


def build_dataset(
    roles: Roles,
    frames: list[tuple[str, pd.DataFrame]],
    skipped: set[str],
    *,
    identify: Callable[[pd.DataFrame, list[str]], dict[str, float]] = identifiers.identifier_columns,
) -> Dataset:
    """The splits with their features (identifier columns left out) and the notes on them."""
    validate_roles(roles, frames)
    features = roles.features(frames[0][1])
    keys = identify(frames[0][1], features)
    features = [c for c in features if c not in keys]
    data = Dataset(
        splits=[Split(name, frame, roles, features) for name, frame in frames],
        roles=roles,
        identifiers=keys,
    )
    for split in data.splits[1:]:
        split.features = [c for c in features if c in split.frame.columns]
    data.notes.extend(missing_role_notes(roles, data.splits))
    if "label-noise" in skipped:
        data.notes.append("label-noise skipped")
    elif len(data.train) > noise.NOISE_MAX_ROWS and roles.label is not None:
        data.notes.append(f"label noise scored on a seeded sample of {noise.NOISE_MAX_ROWS:,} training rows")
    if any(len(s) > parity.DRIFT_MAX_ROWS for s in data.splits):
        data.notes.append(f"drift measured on seeded samples of {parity.DRIFT_MAX_ROWS:,} rows per split")
    return data


def run_checks(data: Dataset, skipped: set[str], ctx: engines.EngineData | None = None) -> list[Finding]:
    """Every check not skipped, in catalogue order; with an engine, the exact ones ask it."""
    findings: list[Finding] = []
    for name, run in CHECKS.items():
        if name in skipped:
            continue
        if ctx is None:
            findings.extend(run(data))
        elif name in engines.EXACT_CHECKS:
            findings.extend(engines.EXACT_CHECKS[name](ctx))
        else:  # a model or a test statistic: the pandas check on the seeded samples
            findings.extend(engines.with_sample_sizes(ctx, run(data)))
    return sort_findings(findings)


def missing_role_notes(roles: Roles, splits: list[Split]) -> list[str]:
    """Serving data normally has no label, group or time: the checks that need one skip that
    split, and the summary says so."""
    notes = []
    for split in splits:
        lacking = [
            f"{option} {column!r}"
            for option, column in (("--label", roles.label), ("--group", roles.group), ("--time", roles.time))
            if column is not None and column not in split.frame.columns
        ]
        if lacking:
            named = ", ".join(lacking)
            notes.append(f"{split.name} has no {named} column: checks that need it skip {split.name}")
    return notes


def require_data_extra() -> None:
    """scipy and scikit-learn come with the `data` extra: say how to get them, not a traceback."""
    import importlib.util

    missing = [m for m in ("scipy", "sklearn") if importlib.util.find_spec(m) is None]
    if missing:
        raise UsageError(
            f"trainmedic check data needs {' and '.join(missing)}: "
            + install_hint("scipy scikit-learn", "data")
        )


def _as_frame(value: TableLike, name: str) -> pd.DataFrame:
    frame = _frame_of(value, name)
    _reject_nested(frame, name)
    return frame


def _reject_nested(frame: pd.DataFrame, name: str) -> None:
    """A column of lists or objects (chat messages, preference pairs read as a table) cannot be
    hashed or compared as a value: one line naming it, not a traceback from a check."""
    for column, dtype in frame.dtypes.items():
        if not pd.api.types.is_object_dtype(dtype):
            continue
        where = frame[column].first_valid_index()
        first = frame[column].at[where] if where is not None else None
        if isinstance(first, (list, dict, np.ndarray)):  # unhashable: a Parquet list reads as an array
            kind = {"list": "lists", "dict": "objects"}.get(type(first).__name__, "arrays")
            raise UsageError(
                f"{name}: column {column!r} holds {kind} (e.g. chat messages), not "
                "one value a cell; expected a table of values (fine-tuning data in TRL's formats is "
                "checked without --label, --group, --time, --id and --ignore)"
            )


def _frame_of(value: TableLike, name: str) -> pd.DataFrame:
    if isinstance(value, (str, Path)):
        return read_table(value)
    if not isinstance(value, pd.DataFrame):
        kind = type(value).__name__
        raise UsageError(f"{name}: expected a pandas or Spark DataFrame or a file path, got {kind}")
    if len(value) == 0 or len(value.columns) == 0:
        raise UsageError(f"{name}: the split is empty; expected at least one row")
    if not value.columns.is_unique:
        duplicated = value.columns[value.columns.duplicated()].tolist()
        raise UsageError(f"{name}: duplicate column names {duplicated}; expected unique names")
    if not all(isinstance(c, str) for c in value.columns):
        value = value.rename(columns=str)  # findings name columns as text
    return value
