"""Downsampling keeps what a reader looks for: the peak, the trough, the ends, the order."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from trainmedic.report.downsample import minmax_downsample, split_finite

values = st.lists(st.floats(-1e12, 1e12, allow_nan=False), min_size=1, max_size=3000)


@settings(deadline=None)  # 3,000 points on a loaded CI machine: no per-example time limit
@given(values, st.integers(4, 500))
def test_envelope_ends_and_order_survive(ys: list[float], max_points: int) -> None:
    points = [(float(i), y) for i, y in enumerate(ys)]
    kept = minmax_downsample(points, max_points)
    assert len(kept) <= max(max_points, len(points) if len(points) <= max_points else 0)
    assert max(y for _, y in kept) == max(ys)
    assert min(y for _, y in kept) == min(ys)
    assert kept[0] == points[0]
    assert kept[-1] == points[-1]
    assert [x for x, _ in kept] == sorted({x for x, _ in kept})
    assert set(kept) <= set(points)


def test_one_hour_of_half_second_samples_shrinks_to_the_budget_with_its_spike() -> None:
    points = [(i * 0.5, 1.0 + (i % 7) * 0.01) for i in range(7200)]
    points[4321] = (points[4321][0], 9.5)  # a single-sample spike, as an eval OOM looks
    kept = minmax_downsample(points, 800)
    assert len(kept) <= 800
    assert (4321 * 0.5, 9.5) in kept


def test_short_series_are_left_alone() -> None:
    points = [(0.0, 1.0), (1.0, 3.0), (2.0, 2.0)]
    assert minmax_downsample(points, 800) == points


def test_split_finite_reports_the_first_nonfinite_point() -> None:
    finite, bad = split_finite([(0, 2.0), (1, 1.0), (2, math.inf), (3, math.nan)])
    assert finite == [(0, 2.0), (1, 1.0)]
    assert bad == (2, math.inf)
    assert split_finite([(0, 1.0)]) == ([(0, 1.0)], None)
