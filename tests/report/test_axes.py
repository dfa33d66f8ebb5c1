"""Every range loop of the report ends, whatever the range: ticks, time axes, scales, charts.

A chart's range below the float resolution of its values (a constant learning rate whose
bucketed mean differs in its last bit) once made `nice_ticks` add a step too small to move its
running value, appending ticks until the supervisor ran out of memory. These properties run
each function over equal, nearly equal, tiny, huge, negative, reversed and NaN/infinite ranges.
"""

from __future__ import annotations

import math

from hypothesis import example, given, settings
from hypothesis import strategies as st

from trainmedic.report._html_charts import (
    MAX_TICKS,
    Axis,
    Chart,
    HLine,
    Series,
    VMarker,
    clock,
    drawable_range,
    nice_ticks,
    render_chart,
    time_ticks,
)
from trainmedic.report._html_plots import whole_ticks

# Deadlines off: a property holds however loaded the machine is.
PROPERTIES = settings(deadline=None, max_examples=150)

any_float = st.floats(allow_nan=True, allow_infinity=True)
# Values near one another at every magnitude: x and x moved by a few units in its last place.
near = st.builds(
    lambda x, ulps: (x, x + ulps * math.ulp(x)),
    st.floats(min_value=-1e300, max_value=1e300, allow_nan=False),
    st.integers(min_value=0, max_value=64),
)


def _check_ticks(ticks: list[float], lo: float, hi: float) -> None:
    assert len(ticks) <= MAX_TICKS
    assert all(math.isfinite(t) for t in ticks)
    assert ticks == sorted(ticks)
    finite = [v for v in (lo, hi) if math.isfinite(v)]
    if not finite:
        assert ticks == []
        return
    low, high = min(finite), max(finite)
    slack = (high - low) * 1e-6 + max(abs(low), abs(high)) * 1e-9
    assert ticks, "a finite range has at least one tick"
    assert all(low - slack <= t <= high + slack for t in ticks), (ticks, lo, hi)


@PROPERTIES
@given(any_float, any_float, st.integers(min_value=1, max_value=10))
@example(0.001, 0.0010000000000000002, 5)  # the runaway: a step of 2e-20 never moved 0.001
@example(-1.7976931348623157e308, 1.7976931348623157e308, 5)  # a span wider than the largest float
@example(1e-310, 3e-310, 5)  # subnormal
@example(5.0, -5.0, 5)  # reversed
@example(math.nan, 3.0, 5)
def test_nice_ticks_are_few_finite_and_inside(lo: float, hi: float, count: int) -> None:
    _check_ticks(nice_ticks(lo, hi, count), lo, hi)


@PROPERTIES
@given(near)
def test_nice_ticks_of_nearly_equal_ends_at_any_magnitude(ends: tuple[float, float]) -> None:
    lo, hi = ends
    _check_ticks(nice_ticks(lo, hi), lo, hi)


@PROPERTIES
@given(any_float, any_float)
@example(0.0, 1e12)  # 30,000 years of seconds: whole days, not 11 million ticks of a day
@example(0.0, 0.4)
@example(3600.0, 3600.0000000000005)
def test_time_ticks_are_few_finite_and_inside(lo: float, hi: float) -> None:
    _check_ticks(time_ticks(lo, hi), lo, hi)


@PROPERTIES
@given(any_float, any_float)
@example(1e17, 1e17)
@example(0.0, 3.0)
def test_whole_ticks_are_counts(lo: float, hi: float) -> None:
    ticks = whole_ticks(lo, hi)
    assert len(ticks) <= MAX_TICKS
    assert all(math.isfinite(t) and t == int(t) for t in ticks)


@PROPERTIES
@given(any_float, any_float)
def test_drawable_range_is_finite_ordered_and_wide(lo: float, hi: float) -> None:
    low, high = drawable_range(lo, hi)
    assert math.isfinite(low)
    assert math.isfinite(high)
    assert low < high


@PROPERTIES
@given(any_float)
def test_clock_reads_any_number(seconds: float) -> None:
    assert isinstance(clock(seconds), str)


points = st.lists(st.tuples(any_float, any_float), max_size=40)


@PROPERTIES
@given(points, st.lists(any_float, max_size=3), st.lists(any_float, max_size=2), st.booleans())
@example([(0.0, 0.001), (1.0, 0.0010000000000000002)], [], [], False)
@example([(0.0, -1e308), (1.0, 1e308)], [], [], True)
def test_a_chart_of_any_numbers_renders_without_a_non_finite_coordinate(
    pts: list[tuple[float, float]], markers: list[float], limits: list[float], from_zero: bool
) -> None:
    chart = Chart(
        name="c",
        title="t",
        x=Axis("time", clock, time_ticks),
        y=Axis("value"),
        series=[Series("s", sorted(pts, key=lambda p: (math.isnan(p[0]), p[0])))],
        markers=[VMarker(x, "m", "finding") for x in markers],
        hlines=[HLine(y, "limit") for y in limits],
        y_from_zero=from_zero,
    )
    svg = render_chart(chart)
    coordinates = svg.split("<svg", 1)[1]
    for bad in ("nan", "inf"):
        for written in (f'="{bad}', f'="-{bad}', f"M{bad}", f"L{bad}"):
            assert written not in coordinates
    assert svg.count('class="tick"') <= 2 * MAX_TICKS
