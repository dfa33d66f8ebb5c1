"""Static SVG line charts for the HTML report.

Why hand-written SVG and not an embedded chart library: the report must open
anywhere, offline, print, and stay small enough to attach to a bug report. A
chart library would be most of the file (Plotly's bundle is ~3.5 MB, Chart.js
~200 KB minified), it needs JavaScript (blank charts when scripts are off or
the page is printed before they run, and a source of console errors), and it
would still need our data embedded. An SVG drawn here is a few KB per chart,
scales to a phone through its viewBox, prints as vectors, and shows the numbers
with no runtime at all; hover details come from SVG `<title>` elements.

The charts are plain data (`Chart`), so sections build them without knowing SVG.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from trainmedic.report.downsample import Point, minmax_downsample
from trainmedic.report.html_format import escape

WIDTH, HEIGHT = 720, 260
LEFT, RIGHT, TOP, BOTTOM = 62, 14, 18, 34
_MAX_DOTS = 12
_MIN_BAND_PX = 0.6  # bands narrower than this are merged with their neighbour of the same kind

# The chart records are never compared or printed: `eq=False, repr=False` spares the two
# methods dataclass() would compile for each at import, in every `trainmedic run`.


@dataclass(frozen=True, eq=False, repr=False, slots=True)
class Series:
    """One line. `tone` picks the colour (CSS class `s<tone>`)."""

    label: str
    points: Sequence[Point]
    tone: int = 0
    dashed: bool = False


@dataclass(frozen=True, eq=False, repr=False, slots=True)
class Band:
    """A shaded x interval (a phase), CSS class `band-<kind>`."""

    x0: float
    x1: float
    kind: str
    label: str


@dataclass(frozen=True, eq=False, repr=False, slots=True)
class VMarker:
    """A vertical line at x with a short label (an OOM kill, a finding, a NaN)."""

    x: float
    label: str
    kind: str


@dataclass(frozen=True, eq=False, repr=False, slots=True)
class HLine:
    """A horizontal line at y (a memory limit)."""

    y: float
    label: str
    kind: str = "limit"


@dataclass(frozen=True, eq=False, repr=False, slots=True)
class Axis:
    """An axis: its label, how values are printed and how ticks are placed."""

    label: str
    fmt: Callable[[float], str] = lambda v: f"{v:g}"
    ticks: Callable[[float, float], list[float]] | None = None


@dataclass(eq=False, repr=False, slots=True)
class Chart:
    """One SVG chart of the report: series, phase bands, markers and limit lines."""

    name: str  # `data-chart` attribute: what tests and readers look for
    title: str
    x: Axis
    y: Axis
    series: list[Series] = field(default_factory=list)
    bands: list[Band] = field(default_factory=list)
    markers: list[VMarker] = field(default_factory=list)
    hlines: list[HLine] = field(default_factory=list)
    y_from_zero: bool = True
    peak: Point | None = None  # annotated with a dot and its value


#: No axis has more ticks than this, whatever its range: every tick list is counted out from an
#: index, never grown by adding a step to a running value (near 0.001 a step of 2e-20 is below
#: the spacing of floats, and such a loop never ends).
MAX_TICKS = 12
_NICE = (1.0, 2.0, 2.5, 5.0, 10.0)
#: A range narrower than this share of its values' magnitude is drawn as a constant: its ends
#: differ only in their last bits (a constant learning rate averaged over a bucket).
_RELATIVE_RESOLUTION = 1e-9
_NARROWEST = 1e-290


def finite_range(lo: float, hi: float) -> tuple[float, float] | None:
    """The ends of an axis, ordered; the one finite end twice when the other is NaN or infinite;
    None when neither is finite."""
    ends = sorted(v for v in (lo, hi) if math.isfinite(v))
    return (ends[0], ends[-1]) if ends else None


def is_flat(lo: float, hi: float) -> bool:
    """Whether [lo, hi] is a single value at the resolution of its floats (any magnitude), or
    narrower than `_NARROWEST` (a step that small would underflow)."""
    return hi - lo <= max(abs(lo), abs(hi)) * _RELATIVE_RESOLUTION or hi - lo < _NARROWEST


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2, 2.5, 5 x 10^k steps) covering [lo, hi]: at most `MAX_TICKS`.

    A flat range (equal ends, or ends equal but for their last bits) has one tick; NaN and
    infinite ends are left out; a range wider than the largest float is measured in halves.
    """
    ends = finite_range(lo, hi)
    if ends is None:
        return []
    lo, hi = ends
    if is_flat(lo, hi):
        return [lo]
    raw = (hi / 2 - lo / 2) / count * 2 if math.isinf(hi - lo) else (hi - lo) / count
    exponent = math.floor(math.log10(raw))
    multiple = next((m for m in _NICE if m * 10.0**exponent >= raw), 10.0)
    step = multiple * 10.0**exponent
    first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
    ticks = [_tick(k, multiple, exponent) for k in range(first, min(last, first + MAX_TICKS - 1) + 1)]
    return list(dict.fromkeys(t for t in ticks if math.isfinite(t))) or [lo]


def _tick(k: int, multiple: float, exponent: int) -> float:
    """k steps of `multiple` x 10^exponent, as the decimal it stands for (0.3, not 0.30000000000000004)."""
    if -300 < exponent < 0:  # below 1e-300 the divisor would overflow: the tiny factor is exact enough
        return k * multiple / 10.0**-exponent
    return k * multiple * 10.0**exponent


_TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
_DAY = 86400.0


def time_ticks(lo: float, hi: float, count: int = 6) -> list[float]:
    """Ticks on seconds that read well as clock durations (30 s, 5 min, 1 h); whole days beyond.

    At most `MAX_TICKS`, as `nice_ticks`."""
    ends = finite_range(lo, hi)
    if ends is None:
        return []
    lo, hi = ends
    if is_flat(lo, hi):
        return [lo]
    raw = (hi - lo) / count
    if raw < 1:
        return nice_ticks(lo, hi, count)
    if raw > _TIME_STEPS[-1]:
        return [day * _DAY for day in nice_ticks(lo / _DAY, hi / _DAY, count)]
    step = next(s for s in _TIME_STEPS if s >= raw)
    first = math.ceil(lo / step)
    last = min(math.floor(hi / step), first + MAX_TICKS - 1)
    return [float(k * step) for k in range(first, last + 1)]


def clock(seconds: float) -> str:
    """Seconds as m:ss or h:mm:ss (a time axis label)."""
    if not math.isfinite(seconds):
        return f"{seconds}"
    sign, s = ("-" if seconds < 0 else ""), abs(seconds)
    if s < 60:
        return f"{sign}{round(s, 2):g}s"
    total = round(s)
    h, rem = divmod(total, 3600)
    m, sec = divmod(rem, 60)
    return f"{sign}{h}:{m:02d}:{sec:02d}" if h else f"{sign}{m}:{sec:02d}"


def drawable_range(lo: float, hi: float) -> tuple[float, float]:
    """[lo, hi] made drawable: finite ends in order, and a flat range widened to 5 % of its value
    either side (1 in all around 0), so a constant series is a line across the middle."""
    lo, hi = finite_range(lo, hi) or (0.0, 1.0)
    if is_flat(lo, hi):
        half = abs(lo) * 0.05 or 0.5
        lo, hi = max(lo - half, -_LARGEST), min(hi + half, _LARGEST)
    return lo, hi


_LARGEST = sys.float_info.max


class _Scale:
    """Values to pixels. Differences are taken of halves, so a span wider than the largest
    float (-1e308 to 1e308) scales as any other."""

    def __init__(self, lo: float, hi: float, out_lo: float, out_hi: float) -> None:
        self.lo, self.hi = drawable_range(lo, hi)
        self.out_lo, self.out_hi = out_lo, out_hi
        self._span = self.hi / 2 - self.lo / 2

    def __call__(self, v: float) -> float:
        return self.out_lo + (v / 2 - self.lo / 2) / self._span * (self.out_hi - self.out_lo)


def _extent(chart: Chart, drawn: list[list[Point]]) -> tuple[float, float, float, float]:
    xs = [x for pts in drawn for x, _ in pts] + [m.x for m in chart.markers]
    ys = [y for pts in drawn for _, y in pts] + [h.y for h in chart.hlines]
    xs, ys = [x for x in xs if math.isfinite(x)], [y for y in ys if math.isfinite(y)]
    x_lo, x_hi = drawable_range(min(xs), max(xs)) if xs else (0.0, 1.0)
    y_lo, y_hi = (min(ys), max(ys)) if ys else (0.0, 1.0)
    if chart.y_from_zero:
        y_lo = min(0.0, y_lo)
    if y_lo == 0:  # from zero: no pad below
        y_hi = drawable_range(0.0, y_hi)[1]
        return x_lo, x_hi, 0.0, min(y_hi + y_hi * 0.06, _LARGEST)
    y_lo, y_hi = drawable_range(y_lo, y_hi)
    pad = (y_hi / 2 - y_lo / 2) * 0.12  # 6 % of the span, taken of halves (no overflow)
    return x_lo, x_hi, max(y_lo - pad, -_LARGEST), min(y_hi + pad, _LARGEST)


def _path(points: Sequence[Point], sx: _Scale, sy: _Scale) -> str:
    """The line through the finite points (a NaN or an infinity is a gap, never a coordinate)."""
    parts: list[str] = []
    gap = True
    for x, y in points:
        if not (math.isfinite(x) and math.isfinite(y)):
            gap = True
            continue
        parts.append(f"{'M' if gap else 'L'}{sx(x):.1f} {sy(y):.1f}")
        gap = False
    return "".join(parts)


def _bands(chart: Chart, sx: _Scale, top: float, height: float) -> list[str]:
    merged: list[tuple[float, float, Band]] = []
    for band in sorted(chart.bands, key=lambda b: b.x0):
        x0, x1 = max(sx(band.x0), sx.out_lo), min(sx(band.x1), sx.out_hi)
        if x1 <= x0:
            continue
        last = merged[-1] if merged else None
        if last and last[2].kind == band.kind and x0 - last[1] < _MIN_BAND_PX:
            merged[-1] = (last[0], max(last[1], x1), last[2])
        else:
            merged.append((x0, x1, band))
    return [
        f'<rect class="band band-{escape(b.kind)}" x="{x0:.1f}" y="{top:.1f}" '
        f'width="{max(x1 - x0, _MIN_BAND_PX):.1f}" height="{height:.1f}">'
        f"<title>{escape(b.label)}</title></rect>"
        for x0, x1, b in merged
    ]


def render_chart(chart: Chart) -> str:
    """The chart as an inline `<figure>`: SVG plot plus an HTML legend (wraps on phones)."""
    drawn = [minmax_downsample(s.points) for s in chart.series]
    x_lo, x_hi, y_lo, y_hi = _extent(chart, drawn)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    sx, sy = _Scale(x_lo, x_hi, LEFT, LEFT + plot_w), _Scale(y_lo, y_hi, TOP + plot_h, TOP)
    out = [
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img" preserveAspectRatio="xMidYMid meet">',
        f"<title>{escape(chart.title)}</title>",
    ]
    out += _bands(chart, sx, TOP, plot_h)
    out += _grid(chart, sx, sy, (x_lo, x_hi), (y_lo, y_hi))
    for h in (h for h in chart.hlines if math.isfinite(h.y)):
        y = sy(h.y)
        out.append(
            f'<line class="hline {escape(h.kind)}" x1="{LEFT}" x2="{LEFT + plot_w}" '
            f'y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="hline-label" x="{LEFT + 4}" y="{y - 4:.1f}">'
            f"{escape(h.label)}</text>"
        )
    for series, pts in zip(chart.series, drawn, strict=True):
        dash = " dashed" if series.dashed else ""
        out.append(
            f'<path class="line s{series.tone % 8}{dash}" d="{_path(pts, sx, sy)}">'
            f"<title>{escape(series.label)}</title></path>"
        )
        if len(pts) <= _MAX_DOTS:  # a line of a few points (epochs) needs its points seen
            out.extend(
                f'<circle class="dot s{series.tone % 8}" cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.8">'
                f"<title>{escape(series.label)}: {escape(chart.y.fmt(y))}</title></circle>"
                for x, y in pts
                if math.isfinite(x) and math.isfinite(y)
            )
    out += _markers(chart, sx)
    if chart.peak is not None and all(math.isfinite(v) for v in chart.peak):
        px, py = sx(chart.peak[0]), sy(chart.peak[1])
        label = f"peak {chart.y.fmt(chart.peak[1])} {chart.y.label}"
        anchor = "end" if px > LEFT + plot_w * 0.7 else "start"
        dx = -6 if anchor == "end" else 6
        out.append(
            f'<circle class="peak" cx="{px:.1f}" cy="{py:.1f}" r="3.5"/>'
            f'<text class="peak-label" x="{px + dx:.1f}" y="{max(py - 4, TOP + 10):.1f}" '
            f'text-anchor="{anchor}">{escape(label)}</text>'
        )
    out.append("</svg>")
    return (
        f'<figure class="chart" data-chart="{escape(chart.name)}">'
        f"<figcaption>{escape(chart.title)}</figcaption>{''.join(out)}{_legend(chart)}</figure>"
    )


def _grid(
    chart: Chart, sx: _Scale, sy: _Scale, xr: tuple[float, float], yr: tuple[float, float]
) -> list[str]:
    out = [
        f'<rect class="frame" x="{LEFT}" y="{TOP}" width="{sx.out_hi - LEFT}" height="{sy.out_lo - TOP}"/>'
    ]
    for v in (chart.y.ticks or nice_ticks)(*yr):
        y = sy(v)
        if TOP - 0.5 <= y <= sy.out_lo + 0.5:
            out.append(
                f'<line class="grid" x1="{LEFT}" x2="{sx.out_hi}" y1="{y:.1f}" y2="{y:.1f}"/>'
                f'<text class="tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">'
                f"{escape(chart.y.fmt(v))}</text>"
            )
    for v in (chart.x.ticks or nice_ticks)(*xr):
        x = sx(v)
        if LEFT - 0.5 <= x <= sx.out_hi + 0.5:
            out.append(
                f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{sy.out_lo}"/>'
                f'<text class="tick" x="{x:.1f}" y="{sy.out_lo + 14}" text-anchor="middle">'
                f"{escape(chart.x.fmt(v))}</text>"
            )
    out.append(
        f'<text class="axis-label" x="{sx.out_hi}" y="{HEIGHT - 4}" text-anchor="end">'
        f"{escape(chart.x.label)}</text>"
        f'<text class="axis-label" x="4" y="{TOP - 6}">{escape(chart.y.label)}</text>'
    )
    return out


def _markers(chart: Chart, sx: _Scale) -> list[str]:
    out: list[str] = []
    by_x: dict[float, list[VMarker]] = {}
    for m in (m for m in chart.markers if math.isfinite(m.x)):
        by_x.setdefault(round(sx(m.x), 1), []).append(m)
    for x, group in sorted(by_x.items()):
        label = ", ".join(dict.fromkeys(m.label for m in group))
        kind = " ".join(dict.fromkeys(m.kind for m in group))  # a NaN and its finding share a step
        anchor = "end" if x > LEFT + (WIDTH - LEFT - RIGHT) * 0.7 else "start"
        dx = -4 if anchor == "end" else 4
        out.append(
            f'<g class="marker {escape(kind)}"><title>{escape(label)}</title>'
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{HEIGHT - BOTTOM}"/>'
            f'<text x="{x + dx:.1f}" y="{HEIGHT - BOTTOM - 5}" text-anchor="{anchor}">'
            f"{escape(label)}</text></g>"
        )
    return out


def _legend(chart: Chart) -> str:
    items = [
        f'<li><span class="swatch s{s.tone % 8}{" dashed" if s.dashed else ""}"></span>{escape(s.label)}</li>'
        for s in chart.series
    ]
    for kind in dict.fromkeys(b.kind for b in chart.bands):
        items.append(
            f'<li><span class="swatch band-{escape(kind)}"></span>{escape(kind.replace("_", " "))}</li>'
        )
    for h in chart.hlines:
        items.append(f'<li><span class="swatch {escape(h.kind)}"></span>{escape(h.label)}</li>')
    return f'<ul class="legend">{"".join(items)}</ul>' if items else ""
