"""Shrink long series for drawing without losing their peaks.

A one-hour run sampled every 0.5 s has 7,200 memory samples per line; a chart
720 px wide cannot show more than ~2 points per pixel column anyway. Averaging
would hide exactly what the report is for (the spike that hit the limit), so
each bucket keeps its minimum and its maximum, in time order: the drawn
envelope is the same as the full series', at a fraction of the size.

Plain Python on purpose: the supervisor renders a report at the end of every run,
and importing numpy (~0.2 s of CPU) cost more than the bucketing itself (a few ms
for an hour of samples).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

Point = tuple[float, float]

DEFAULT_MAX_POINTS = 800


def minmax_downsample(points: Sequence[Point], max_points: int = DEFAULT_MAX_POINTS) -> list[Point]:
    """At most `max_points` points (rounded down to even): the min and max of each index bucket.

    Points are (x, y) with x ascending. The global minimum and maximum always survive,
    and so do the first and last points.
    """
    n = len(points)
    if n <= max_points or max_points < 4:
        return list(points)
    ys = [y for _, y in points]
    buckets = (max_points - 2) // 2
    edges = [1 + (k * (n - 2)) // buckets for k in range(buckets + 1)]
    kept: list[Point] = [points[0]]
    for lo, hi in itertools.pairwise(edges):
        if lo >= hi:
            continue
        indices = range(lo, hi)
        i_min, i_max = min(indices, key=ys.__getitem__), max(indices, key=ys.__getitem__)
        kept.extend(points[i] for i in sorted({i_min, i_max}))
    kept.append(points[-1])
    return kept


def split_finite(points: Sequence[Point]) -> tuple[list[Point], Point | None]:
    """The finite points, and the first point whose value is NaN or infinite (None if none)."""
    finite: list[Point] = []
    first_bad: Point | None = None
    for x, y in points:
        if math.isfinite(y):
            finite.append((x, y))
        elif first_bad is None:
            first_bad = (x, y)
    return finite, first_bad
