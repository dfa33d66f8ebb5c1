"""Property: random clean splits never report overlap, and `split` never leaks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainmedic.data import check, split

LEAKS = {"DAT001", "DAT002", "DAT003", "DAT004"}


def _frame(n: int, seed: int, levels: int, with_group: bool) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "x": rng.normal(size=n),
            "k": rng.integers(0, levels, size=n),
            "s": rng.choice(["a", "b", "c"][: max(1, levels % 4)], size=n),
        }
    )
    frame["y"] = rng.integers(0, 2, size=n)
    if with_group:
        frame["g"] = rng.integers(0, max(2, n // 5), size=n)
    return frame


frames = st.builds(
    _frame,
    n=st.integers(20, 400),
    seed=st.integers(0, 2**32 - 1),
    levels=st.integers(1, 6),
    with_group=st.booleans(),
)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frame=frames, seed=st.integers(0, 1000))
def test_random_split_of_distinct_rows_never_reports_overlap(frame: pd.DataFrame, seed: int) -> None:
    frame = frame.drop(columns="g", errors="ignore").drop_duplicates(subset=["x", "k", "s"])
    order = np.random.default_rng(seed).permutation(len(frame))
    cut = max(1, len(frame) // 4)
    train, val = frame.iloc[order[cut:]], frame.iloc[order[:cut]]
    findings = check(train, val, label="y", label_noise=False)
    assert {f.code for f in findings} & LEAKS == set()


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frame=frames, seed=st.integers(0, 1000), strategy=st.sampled_from(["random", "stratified", "group"]))
def test_split_never_leaks_even_with_duplicates_and_groups(
    frame: pd.DataFrame, seed: int, strategy: str
) -> None:
    if strategy == "group" and "g" not in frame.columns:
        frame = frame.assign(g=np.arange(len(frame)) % 7)
    frame = pd.concat([frame, frame.iloc[: len(frame) // 3]], ignore_index=True)  # planted duplicates
    group = "g" if "g" in frame.columns else None
    parts = [p for p in split(frame, strategy, label="y", group=group, seed=seed) if len(p)]
    assert sum(len(p) for p in parts) == len(frame)
    if len(parts) > 1:
        findings = check(*parts, label="y", group=group, label_noise=False)
        assert {f.code for f in findings} & {"DAT001", "DAT003"} == set()
