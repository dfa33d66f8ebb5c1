"""Metric curves for the dynamics rules: which series is the loss, and robust statistics of it.

Shared by TRN001-TRN004 (`rules/trn/`) and `trainmedic diff`. Pure: it reads a `RunRecord`, never a file.
A curve can come from epoch events (Keras history), step events (the in-process
guards), single metrics, or whole log series (TensorBoard, HF): the rules see one
shape. Huge curves (a million TensorBoard points) are reduced to bucket medians
before any rule looks at them, which is both fast and robust to spikes.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias, TypeVar

from trainmedic.events import Epoch, Metric, MetricSeries, Step
from trainmedic.record import RunRecord

if TYPE_CHECKING:  # numpy is imported where a curve is built: a run without curves never pays for it
    import numpy as np
    from numpy.typing import NDArray

    FloatArray: TypeAlias = NDArray[np.float64]

#: Name tokens that mark a validation/evaluation metric (Keras `val_`, HF `eval_`, TB `validation/`).
VAL_TOKENS = frozenset({"val", "valid", "validation", "eval", "evaluation", "test", "dev"})
#: Tokens that make a "loss"-named metric something else (AMP loss scale, loss weights).
NOT_A_LOSS = frozenset({"scale", "scaler", "weight", "weights"})
#: Rules look at no more points than this: longer curves become bucket medians.
MAX_POINTS = 2000
#: A loss centred on zero: over the first half of its curve it changes sign at least this many
#: times and its median lies within one point-to-point noise of zero (see `centred_on_zero`).
CENTRED_SIGN_CHANGES = 3
_SPLIT = re.compile(r"[/._\-\s:]+")


@dataclass(frozen=True, slots=True)
class Curve:
    """One metric over training: `x` is the global step (or the epoch index when `per == "epoch"`)."""

    name: str
    x: FloatArray
    y: FloatArray
    per: str  # "step" | "epoch"
    epoch: FloatArray | None = None  # epoch of each point where known (0-based index or HF fraction)
    # the process (pid) that logged each point, where several jobs or attempts of one run log the
    # same curve; None for one process, merged ranks and read logs
    source: FloatArray | None = None

    def __len__(self) -> int:
        return len(self.y)

    def finite_prefix(self) -> Curve:
        """The curve up to (not including) its first NaN/Inf."""
        import numpy as np

        bad = np.flatnonzero(~np.isfinite(self.y))
        return self if not len(bad) else self.head(int(bad[0]))

    def head(self, n: int) -> Curve:
        epoch = None if self.epoch is None else self.epoch[:n]
        source = None if self.source is None else self.source[:n]
        return Curve(self.name, self.x[:n], self.y[:n], self.per, epoch, source)

    def epoch_at(self, i: int) -> int | None:
        """The epoch (0-based) of point i, when the log says."""
        import numpy as np

        if self.per == "epoch":
            return int(self.x[i])
        if self.epoch is None or not np.isfinite(self.epoch[i]):
            return None
        return int(self.epoch[i])


def tokens(name: str) -> list[str]:
    return [t for t in _SPLIT.split(name.lower()) if t]


def is_loss(name: str) -> bool:
    parts = tokens(name)
    return any(t == "loss" or t.endswith("loss") for t in parts) and not NOT_A_LOSS & set(parts)


def is_validation(name: str) -> bool:
    return bool(VAL_TOKENS & set(tokens(name)))


def curve(record: RunRecord, name: str, *, prefer: str = "epoch") -> Curve | None:
    """The curve of one metric name, from whichever events carry it.

    Epoch events first (one point per epoch compares runs and splits best), unless
    `prefer="step"`: a guard that logs every batch *and* every epoch then gives the step
    a loss went NaN, not just its epoch.
    """
    if prefer == "step":
        by_step = _step_curve(record, name)
        if by_step is not None:
            return by_step
    epochs = last_training([e for e in record.of_type(Epoch) if name in e.metrics], lambda e: e.epoch)
    if epochs:
        points = _across_ranks([(e.epoch, _num(e.metrics[name]), e.rank, math.nan, e.pid) for e in epochs])
        return _from_points(name, [(x, y) for x, y, _, _ in points], "epoch", None, [p for *_, p in points])
    by_step = _step_curve(record, name)
    if by_step is not None:
        return by_step
    singles = [m for m in record.of_type(Metric) if m.name == name]
    if singles:
        per = "step" if any(m.step is not None for m in singles) else "epoch"
        pts = [((m.step or 0) if per == "step" else (m.epoch or 0), m.value) for m in singles]
        ep = [float(m.epoch) if m.epoch is not None else math.nan for m in singles]
        return _from_points(name, pts, per, ep)
    return _from_series([s for s in record.of_type(MetricSeries) if s.name == name])


E = TypeVar("E", Epoch, Step)


def last_training(events: list[E], index: Callable[[E], int]) -> list[E]:
    """The events of each process's last training, where one process trained several times.

    A notebook kernel that runs `model.fit` in two cells (or re-runs a cell) reports epochs
    0, 1, 2 and then 0, 1 again from the same process: one curve of both would put two
    trainings' values on one epoch. Going back to the first index of the current training
    (or before it) in the same process and rank starts a new training, and only the last is
    kept. Restarted attempts and ranks are other processes; a continued fit (`initial_epoch`)
    repeats no index, and a resume that replays from a checkpoint's step goes back less far:
    all of those are kept as one curve.
    """
    first: dict[tuple[int, int | None], int] = {}
    start: dict[tuple[int, int | None], int] = {}
    for position, event in enumerate(events):
        key, at = (event.pid, event.rank), index(event)
        if key not in first:
            first[key] = at
        elif at <= first[key]:
            first[key] = at
            start[key] = position
    if not start:
        return events
    return [e for position, e in enumerate(events) if position >= start.get((e.pid, e.rank), 0)]


#: The torch guard's observation that another optimizer took the training over, from its step.
HANDOVER_OBSERVATION = "optimizer_handover"


def since_handover(record: RunRecord, steps: list[Step]) -> list[Step]:
    """The steps from the last optimizer handover of each process on (all when there was none).

    When another optimizer takes over from the one that numbered the steps (the next layer of
    a layer-wise training, a second stage with its own optimizer), the loss is another
    objective from there: the next layer's starts high again. One curve of both would read
    that restart as a rise, and the first stage's low end as the run's best.
    """
    start: dict[tuple[int, int | None], int] = {}
    for obs in record.guard_observations:
        if obs.check == HANDOVER_OBSERVATION and obs.step is not None:
            key = (obs.pid, obs.rank)
            start[key] = max(start.get(key, obs.step), obs.step)
    if not start:
        return steps
    return [s for s in steps if s.step >= start.get((s.pid, s.rank), 0)]


def _step_curve(record: RunRecord, name: str) -> Curve | None:
    steps = last_training([s for s in record.curve_steps if name in s.metrics], lambda s: s.step)
    steps = since_handover(record, steps)
    if not steps:
        return None
    points = _across_ranks(
        [
            (
                s.step,
                _num(s.metrics[name]),
                s.rank,
                float(s.epoch) if s.epoch is not None else math.nan,
                s.pid,
            )
            for s in steps
        ]
    )
    return _from_points(
        name, [(x, y) for x, y, _, _ in points], "step", [e for _, _, e, _ in points], [p for *_, p in points]
    )


def nonfinite_ranks(record: RunRecord, c: Curve, x: float) -> list[int]:
    """The ranks whose own value of curve `c` is NaN/Inf at step (or epoch) `x`.

    A curve logged by several ranks is their mean (`_across_ranks`), so a NaN on one rank
    makes the merged point NaN without saying where it came from; in a data-parallel job the
    first rank to go non-finite is the one whose shard or state holds the cause. Empty when
    fewer than two ranks log the curve.
    """
    events: list[Epoch] | list[Step]
    if c.per == "epoch":
        events = last_training([e for e in record.of_type(Epoch) if c.name in e.metrics], lambda e: e.epoch)
        at_x = [(e.epoch, e.rank, e.metrics[c.name]) for e in events]
    else:
        steps = last_training([s for s in record.steps if c.name in s.metrics], lambda s: s.step)
        at_x = [(s.step, s.rank, s.metrics[c.name]) for s in since_handover(record, steps)]
    if len({rank for _, rank, _ in at_x if rank is not None}) < 2:
        return []
    return sorted({rank for i, rank, y in at_x if rank is not None and i == x and not math.isfinite(_num(y))})


def _across_ranks(
    points: list[tuple[int, float, int | None, float, int]],
) -> list[tuple[int, float, float, int]]:
    """One point per step/epoch when several ranks log the same curve: the mean over ranks.

    Every rank of a data-parallel run logs its own loss for the same step or epoch; counted
    side by side they would double the epochs a curve spans ("6 epochs" for 3 on 2 ranks)
    and read the spread between ranks as noise. The mean is the loss over the global batch,
    what an all-reduced log shows; a NaN on any rank stays a NaN. A single rank (or none)
    keeps every point as logged, restarts included, each with the pid that logged it (merged
    ranks: 0, one source).
    """
    if len({rank for _, _, rank, _, _ in points}) < 2:
        return [(x, y, e, pid) for x, y, _, e, pid in points]
    grouped: dict[int, list[tuple[float, float]]] = {}
    for x, y, _, e, _ in points:
        grouped.setdefault(x, []).append((y, e))
    merged = []
    for x, values in grouped.items():
        epochs = [e for _, e in values if math.isfinite(e)]
        merged.append((x, sum(y for y, _ in values) / len(values), epochs[0] if epochs else math.nan, 0))
    return merged


def _from_points(
    name: str,
    points: list[tuple[int, float]],
    per: str,
    epochs: list[float] | None,
    sources: list[int] | None = None,
) -> Curve:
    import numpy as np

    x = np.fromiter((p[0] for p in points), dtype=np.float64, count=len(points))
    y = np.fromiter((_num(p[1]) for p in points), dtype=np.float64, count=len(points))
    ep = None if epochs is None else np.asarray(epochs, dtype=np.float64)
    source = None if sources is None or len(set(sources)) < 2 else np.asarray(sources, dtype=np.float64)
    return _sorted(Curve(name, x, y, per, ep, source))


def _from_series(series: list[MetricSeries]) -> Curve | None:
    if not series:
        return None
    import numpy as np

    x = np.concatenate([np.asarray(s.steps, dtype=np.float64) for s in series])
    y = np.concatenate([np.asarray(s.values, dtype=np.float64) for s in series])
    ep: FloatArray | None = None
    if any(s.epochs is not None for s in series):
        ep = np.concatenate(
            [
                np.asarray(s.epochs, dtype=np.float64)
                if s.epochs is not None
                else np.full(len(s.steps), np.nan)
                for s in series
            ]
        )
    return _sorted(Curve(series[0].name, x, y, series[0].per, ep))


def _sorted(c: Curve) -> Curve:
    import numpy as np

    if len(c.x) < 2 or bool(np.all(np.diff(c.x) >= 0)):
        return c
    order = np.argsort(c.x, kind="stable")  # merged ranks/restarts: order by step, keep file order on ties
    epoch = None if c.epoch is None else c.epoch[order]
    return Curve(c.name, c.x[order], c.y[order], c.per, epoch, None if c.source is None else c.source[order])


def _num(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")


def loss_curves(record: RunRecord, *, prefer: str = "epoch") -> tuple[list[Curve], list[Curve]]:
    """(training-loss curves, validation-loss curves), the preferred first."""
    train: list[Curve] = []
    val: list[Curve] = []
    for name in sorted(n for n in record.metric_names() if is_loss(n)):
        c = curve(record, name, prefer=prefer)
        if c is not None and len(c):
            (val if is_validation(name) else train).append(c)
    key = _preference
    return sorted(train, key=key), sorted(val, key=key)


def _preference(c: Curve) -> tuple[int, int, str]:
    """Plain names first (`loss`, `train_loss`), then the curve with the most points."""
    plain = (
        0
        if tokens(c.name) in (["loss"], ["train", "loss"], ["epoch", "loss"], ["train", "epoch", "loss"])
        else 1
    )
    return (plain, -len(c), c.name)


def train_loss(record: RunRecord) -> Curve | None:
    """The training loss with the most points (the step-level one when both exist)."""
    train, _ = loss_curves(record)
    return max(train, key=len) if train else None


# -- robust statistics -------------------------------------------------------------------------


def reduce(c: Curve, max_points: int = MAX_POINTS) -> Curve:
    """At most `max_points` points: bucket medians of y, last x of each bucket (finite values only)."""
    import numpy as np

    n = len(c)
    if n <= max_points:
        return c
    edges = np.linspace(0, n, max_points + 1).astype(np.int64)
    y = np.array([_nanmedian(c.y[a:b]) for a, b in itertools.pairwise(edges)])
    last = edges[1:] - 1
    epoch = None if c.epoch is None else c.epoch[last]
    return Curve(c.name, c.x[last], y, c.per, epoch)  # a bucket may span processes: one source


def _nanmedian(values: FloatArray) -> float:
    import numpy as np

    finite = values[np.isfinite(values)]
    return float(np.median(finite)) if len(finite) else float("nan")


def rolling_median(y: FloatArray, window: int) -> FloatArray:
    """Centred rolling median (ends padded with the edge value); window 1 returns a copy of y."""
    import numpy as np

    window = max(1, window | 1)
    if window == 1 or len(y) < 3:
        return np.array(y, dtype=np.float64)
    half = window // 2
    padded = np.pad(y, half, mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, window)
    return np.asarray(np.median(windows, axis=1), dtype=np.float64)


def noise_sigma(y: FloatArray, source: FloatArray | None = None) -> float:
    """Point-to-point noise: MAD of first differences, scaled to a normal sigma (trend-free).

    With `source` (the process of each point: several jobs or attempts of one run logging the
    same steps), only differences between consecutive points of one process count: a job
    restarted from a trained checkpoint logs low losses at the steps where the first job's
    were still high, and the steps interleave them; the jumps between the two are no noise.
    """
    import numpy as np

    if len(y) < 3:
        return 0.0
    diffs = np.diff(y)
    if source is not None and len(source) == len(y):
        order = np.argsort(source, kind="stable")  # each process's points together, in step order
        same = np.diff(source[order]) == 0
        diffs = np.diff(y[order])[same]
        if len(diffs) < 2:
            return 0.0
    return float(1.4826 * np.median(np.abs(diffs - np.median(diffs))) / np.sqrt(2.0))


def smoothing_window(n: int) -> int:
    """About a tenth of the curve, odd, at least 1: enough to flatten noise, short enough to see a turn."""
    return max(1, (n // 10) | 1) if n >= 7 else 1


@dataclass(frozen=True, slots=True)
class Departure:
    """Where curve B first leaves curve A beyond noise (and stays away)."""

    x: int
    a: float
    b: float
    noise: float


#: `diff`: B departs when it is this many noise-sigmas from A ...
DEPART_SIGMAS = 4.0
#: ... for this many consecutive shared points (or to the end).
DEPART_HOLD = 3


def departure(a: Curve, b: Curve) -> Departure | None:
    """Compare B to A (the known-good run) point by point on their shared steps/epochs."""
    import numpy as np

    if a.per != b.per:
        return None
    xs, ia, ib = np.intersect1d(a.x, b.x, return_indices=True)
    if len(xs) < 2:
        return None
    ya, yb = a.y[ia], b.y[ib]
    finite_a = ya[np.isfinite(ya)]
    if not len(finite_a):
        return None
    floor = max(1e-3 * float(np.median(np.abs(finite_a))), 1e-12)
    # Noise of the difference of two runs, measured locally on A: early steps are far noisier
    # than late ones, and one global sigma would call every early wobble a departure.
    noise = np.maximum(local_noise(np.where(np.isfinite(ya), ya, 0.0)) * np.sqrt(2.0), floor)
    broke = np.isfinite(ya) & ~np.isfinite(yb)
    gap = np.where(np.isfinite(ya) & np.isfinite(yb), yb - ya, 0.0)
    smooth = rolling_median(gap, 5) if len(gap) >= 5 else gap
    beyond = (np.abs(smooth) > DEPART_SIGMAS * noise) | broke
    for i in np.flatnonzero(beyond):
        if beyond[i : i + DEPART_HOLD].all():
            return Departure(x=int(xs[i]), a=float(ya[i]), b=float(yb[i]), noise=float(noise[i]))
    return None


def centred_on_zero(c: Curve) -> bool:
    """A loss whose level is not a distance to a target: it hovers around zero from the start.

    An error measure (cross-entropy, squared error, a likelihood of discrete data) is positive
    and starts at the untrained model's error, so its rise over its minimum, its ratio to its
    start and its flatness say how the fit goes. A policy-gradient surrogate (-log pi x a
    normalised advantage), a Wasserstein critic's estimate or a similar objective is centred on
    zero by construction: it changes sign from batch to batch, and its size follows things
    other than the fit (a REINFORCE episode's loss grows with the episode, as the policy gets
    better). Several sign changes and a median within noise of zero over the first half tell
    it from a loss that crosses zero once on its way down (a log-density of continuous data).
    """
    import numpy as np

    y = reduce(c).y
    y = y[np.isfinite(y)]
    head = y[: max(2, len(y) // 2)]
    signs = np.sign(head[head != 0])
    changes = int(np.count_nonzero(signs[1:] != signs[:-1]))
    return changes >= CENTRED_SIGN_CHANGES and abs(float(np.median(head))) <= noise_sigma(y)


def local_noise(y: FloatArray) -> FloatArray:
    """Point-to-point noise around each point (MAD of first differences in a window of ~1/10 of the curve)."""
    import numpy as np

    if len(y) < 3:
        return np.zeros(len(y))
    diffs = np.abs(np.diff(y))
    window = min(len(diffs), max(5, (len(y) // 10) | 1))
    inner = np.median(np.lib.stride_tricks.sliding_window_view(diffs, window), axis=1)
    before = (len(y) - len(inner)) // 2  # full windows only; the ends take their nearest full window
    spread = np.pad(inner, (before, len(y) - len(inner) - before), mode="edge")
    return np.asarray(1.4826 * spread / np.sqrt(2.0), dtype=np.float64)


def final_value(c: Curve) -> float | None:
    """The last finite value of a curve (None when it has none)."""
    import numpy as np

    finite = np.flatnonzero(np.isfinite(c.y))
    return float(c.y[finite[-1]]) if len(finite) else None


def at(c: Curve, i: int) -> str:
    """'step 412 (epoch 3)' / 'epoch 5', epochs counted from 1 as the frameworks print them."""
    epoch = c.epoch_at(i)
    if c.per == "epoch":
        return f"epoch {int(c.x[i]) + 1}"
    return f"step {int(c.x[i])}" + (f" (epoch {epoch + 1})" if epoch is not None else "")


def where(c: Curve, i: int) -> tuple[int | None, int | None]:
    """Finding location fields: (global step, epoch counted from 1 as the frameworks print it).

    Events keep the frameworks' 0-based epoch index; findings are read by people, who see
    "Epoch 3/12" in their logs, so a finding's epoch is 1-based like its message.
    """
    epoch = c.epoch_at(i)
    return (int(c.x[i]) if c.per == "step" else None), (None if epoch is None else epoch + 1)
