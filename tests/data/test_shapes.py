"""Property: no table shape makes `check data` raise a traceback.

All-missing, constant, single-row, one-class, identifier, mixed-type, boolean,
timezone-aware datetime, very wide tables, unicode and duplicated column names: the
result is findings, or a one-line usage error (exit 2 from the command line), never an
exception from inside a check.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainmedic.data import check
from trainmedic.errors import UsageError

from ..conftest import run_cli

COLUMN_KINDS = (
    "float",
    "all_missing",
    "constant",
    "identifier",
    "mixed",
    "bool",
    "tz_datetime",
    "category",
    "int_with_missing",
    "unicode_text",
)
NAMES = ("x", "größe", "名前", "naïve col", "id", "customer_id", "1", "")


def _column(kind: str, n: int, rng: np.random.Generator, offset: int) -> object:
    if kind == "float":
        return rng.normal(size=n)
    if kind == "all_missing":
        return np.full(n, np.nan)
    if kind == "constant":
        return np.full(n, "same", dtype=object)
    if kind == "identifier":
        return [f"row-{offset + i:06d}" for i in range(n)]
    if kind == "mixed":
        return [1, "two", 3.5, None, True][: max(1, n)] * (n // 5 + 1)
    if kind == "bool":
        return rng.random(n) < 0.5
    if kind == "tz_datetime":
        start = pd.Timestamp("2024-03-30", tz="Europe/Paris") + pd.Timedelta(hours=offset)  # DST change
        return pd.date_range(start, periods=n, freq="h")
    if kind == "category":
        return pd.Categorical(rng.choice(["a", "b", "c"], size=n))
    if kind == "int_with_missing":
        return pd.array(np.where(rng.random(n) < 0.3, None, rng.integers(0, 5, size=n)), dtype="Int64")
    return rng.choice(["é", "ß", "中文", "🙂"], size=n)


def _table(kinds: list[str], names: list[str], n: int, label: str, seed: int, offset: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    columns = {}
    for i, (kind, name) in enumerate(zip(kinds, names, strict=True)):
        values = _column(kind, n, rng, offset)
        columns[f"{name}{i}"] = list(values)[:n] if kind == "mixed" else values
    frame = pd.DataFrame(columns)
    if label == "one_class":
        frame["y"] = 1
    elif label == "two_classes":
        frame["y"] = rng.integers(0, 2, size=n)
    elif label == "numeric":
        frame["y"] = rng.normal(size=n)
    else:
        frame["y"] = np.where(rng.random(n) < 0.5, "yes", None)
    return frame


tables = st.fixed_dictionaries(
    {
        "kinds": st.lists(st.sampled_from(COLUMN_KINDS), min_size=1, max_size=6),
        "rows": st.sampled_from([1, 2, 7, 40, 130]),
        "label": st.sampled_from(["one_class", "two_classes", "numeric", "mostly_missing"]),
        "seed": st.integers(0, 1000),
        "with_serving": st.booleans(),
    }
)


def _splits(spec: dict[str, object]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame | None]:
    kinds = list(spec["kinds"])  # type: ignore[call-overload]
    names = [NAMES[i % len(NAMES)] for i in range(len(kinds))]
    rows, label, seed = int(spec["rows"]), str(spec["label"]), int(spec["seed"])  # type: ignore[call-overload]
    train = _table(kinds, names, rows, label, seed, 0)
    val = _table(kinds, names, max(1, rows // 3), label, seed + 1, 10_000)
    serving = _table(kinds, names, max(1, rows // 3), label, seed + 2, 20_000).drop(columns="y")
    return train, val, serving if spec["with_serving"] else None


@pytest.mark.slow
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=tables)
def test_any_table_shape_gives_findings_or_a_usage_error(spec: dict[str, object]) -> None:
    train, val, serving = _splits(spec)
    message = ""
    try:
        findings = check(train, val, serving=serving, label="y")
    except UsageError as exc:  # bad input is fine; one line, no traceback
        message, findings = str(exc), []
    assert "\n" not in message
    assert all(f.code.startswith("DAT") for f in findings)


@pytest.mark.slow
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=tables)
def test_tz_aware_time_column_and_serving_without_it(spec: dict[str, object]) -> None:
    train, val, _ = _splits(spec)
    for frame, start in ((train, "2024-01-01"), (val, "2025-01-01")):
        frame["when"] = pd.date_range(start, periods=len(frame), freq="D", tz="UTC")
    serving = val.drop(columns=["y", "when"])
    report_findings = check(train, val, serving=serving, label="y", time="when")
    assert "DAT004" not in {f.code for f in report_findings}


def test_very_wide_table_with_unicode_names() -> None:
    rng = np.random.default_rng(0)
    train = pd.DataFrame(rng.normal(size=(60, 300)), columns=[f"特徴_{i}" for i in range(300)])
    train["y"] = rng.integers(0, 2, size=60)
    val = pd.DataFrame(rng.normal(size=(20, 300)), columns=[f"特徴_{i}" for i in range(300)])
    val["y"] = rng.integers(0, 2, size=20)
    findings = check(train, val, label="y", label_noise=False)  # the model is covered above
    assert {f.code for f in findings} <= {"DAT011"}


@pytest.mark.slow
@pytest.mark.parametrize(
    "header",
    [
        "a,a,y",  # duplicated column names
        "größe,名前,y",  # unicode names
    ],
)
def test_cli_files_of_odd_shapes_exit_cleanly(tmp_path: Path, header: str) -> None:
    rows = [f"{i % 3},{'x' if i % 2 else 'é'},{i % 2}" for i in range(30)]
    (tmp_path / "train.csv").write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    (tmp_path / "serving.csv").write_text(
        "\n".join([",".join(header.split(",")[:2]), *[r.rsplit(",", 1)[0] for r in rows]]) + "\n",
        encoding="utf-8",
    )
    train, serving = str(tmp_path / "train.csv"), str(tmp_path / "serving.csv")
    result = run_cli("check", "data", train, "--serving", serving, "--label", "y")
    assert "Traceback" not in result.stderr
    assert result.returncode in (0, 1, 2), result.stderr
    if result.returncode == 2:
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_all_empty_column_and_serving_without_label_time_group() -> None:
    """The two shapes that crashed: an empty column (the label-noise model), and a serving
    file without the time, group and label columns that train has."""
    rng = np.random.default_rng(0)

    def part(n: int, start: str, group_offset: int) -> pd.DataFrame:
        frame = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n), "empty": np.nan})
        frame["y"] = (frame["a"] > 0).astype(int)
        frame["when"] = pd.date_range(start, periods=n, freq="h")
        frame["patient"] = group_offset + np.arange(n) // 3
        return frame

    train, val = part(300, "2024-01-01", 0), part(100, "2025-01-01", 10_000)
    serving = part(100, "2026-01-01", 20_000).drop(columns=["y", "when", "patient"])
    report = pytest.importorskip("trainmedic.data").check_report(
        train, val, serving=serving, label="y", time="when", group="patient"
    )
    assert {f.code for f in report.findings} & {"DAT003", "DAT004", "DAT010"} == set()
    notes = " ".join(report.summary.notes)
    assert "serving has no --label 'y', --group 'patient', --time 'when' column" in notes
