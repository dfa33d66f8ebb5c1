"""Shrink long series for drawing without losing their peaks.

A one-hour run sampled every 0.5 s has 7,200 memory samples per line; a chart
720 px wide cannot show more than ~2 points per pixel column anyway. Averaging
would hide exactly what the report is for (the spike that hit the limit), so
each bucket keeps its minimum and its maximum, in time order: the drawn
envelope is the same as the full series', at a fraction of the size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

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
    ys = np.fromiter((y for _, y in points), dtype=np.float64, count=n)
    buckets = (max_points - 2) // 2
    edges = 1 + (np.arange(buckets + 1) * (n - 2)) // buckets
    kept: list[Point] = [points[0]]
    for lo, hi in zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True):
        if lo >= hi:
            continue
        segment = ys[lo:hi]
        i_min, i_max = lo + int(segment.argmin()), lo + int(segment.argmax())
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
