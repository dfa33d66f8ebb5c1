"""TRN012 `zero-learning-rate`: the learning rate is 0 (or negligibly small) on steps that train.

Collectors: the PyTorch guard's loss curve (`trainmedic.torch._curve`) reads the learning
rate (`param_groups[0]["lr"]`) where each 10-step window ends and sends it in the window's
`Step` event (`lr`), a read it made anyway; the first step of a scheduler of each kind
sends an `lr_schedule` observation (`OBSERVATION`): the scheduler's class and the optimizer's base
learning rate (`initial_lr`, which every `LRScheduler` but `ReduceLROnPlateau` sets).

Why these thresholds, on general grounds:

- The reference is the larger of the base learning rate and the largest learning rate the
  run used (OneCycle's peak is 25x its `initial_lr`; a warm-up that never reaches its base
  leaves the base as the reference).
- `NEGLIGIBLE_FACTOR` (0.5 %): a step at under 1/200 of the reference moves the weights
  less than 1/200 of what the schedule was set to. Step schedules' standard last stage is
  1/100 of the base (two decays of 10x: ResNet's 30/60/90-epoch recipe): a healthy stage,
  so the cut sits below it with room for floating-point rounding of 0.1 x 0.1.
- `ZERO_SHARE` (25 % of the steps the curve covers): a healthy schedule spends few steps
  that low: a linear warm-up is under 0.5 % of its peak for its first 0.5 %, a linear decay
  to 0 for its last 0.5 % (HF's linear schedule reaches exactly 0 after its last step), a
  cosine decay to 0 for its last ~4.5 %, OneCycle (final lr 1/25,000 of its peak) for ~3 % of
  its steps. Together under 10 %; 25 % leaves room for long warm-ups and short runs, while
  a schedule that ends at 0 a quarter of the run early, or a warm-up stepped once an epoch,
  spends most of the run there. At least `MIN_STEPS` (20) steps and 2 windows are required.
- `ReduceLROnPlateau` lowers the learning rate when the monitored metric stalls: a low rate
  there is the metric's decision, not a schedule's mistake. With it only an exact 0 counts
  (it never reaches 0 by itself: it stops lowering once a change would be under `eps`).
"""

from __future__ import annotations

from trainmedic.events import Event, GuardObservation, Step
from trainmedic.findings import Finding, FindingSpec, Severity, epoch_number
from trainmedic.record import Rule, RunRecord

#: The guard's note of each kind of scheduler stepping an optimizer, at its first step.
OBSERVATION = "lr_schedule"
NEGLIGIBLE_FACTOR = 0.005
ZERO_SHARE = 0.25
MIN_STEPS = 20
PLATEAU = "ReduceLROnPlateau"


def _example() -> list[Event]:
    """A linear schedule with warm-up whose total is one epoch (100 steps) in a 4-epoch run:
    the learning rate is 0 from step 100 to the end (step 400)."""
    events: list[Event] = [
        GuardObservation(
            t=0.0, pid=100, check=OBSERVATION, data={"scheduler": "LambdaLR", "base_lr": 1e-3}, step=1
        )
    ]
    for step in [1, *range(10, 401, 10)]:
        lr = 1e-3 * min(step / 10, max(0.0, (100 - step) / 90))
        events.append(Step(t=float(step), pid=100, step=step, metrics={"loss": 1.0, "lr": lr}))
    return events


SPEC = FindingSpec(
    code="TRN012",
    slug="zero-learning-rate",
    severity=Severity.ERROR,
    title="The learning rate is 0 on steps that train",
    what=(
        "The learning rate was 0, or under 0.5 % of its base, on a large share of the "
        "optimizer steps: the steps ran, took their time and logged a loss, but did not train. "
        "The schedule's shape (its base, its peak and where it reached 0) and the steps affected "
        "are given."
    ),
    why=(
        "Nothing fails: the loss is flat and looks like a plateau. The usual causes are a "
        "schedule sized for fewer steps than the run takes (num_training_steps or T_max set to "
        "one epoch's batches, or counted before gradient accumulation divides them), so it "
        "reaches 0 early and stays there; a per-step schedule (warm-up, linear or cosine decay) "
        "stepped once an epoch, so its warm-up lasts the whole run; a warm-up longer than the "
        "run (warm-up given in samples instead of steps); or lr=0 passed to the optimizer. A "
        "decay that reaches 0 at the very last step (HF's linear schedule) is not reported."
    ),
    example=(
        "get_linear_schedule_with_warmup(optimizer, 10, num_training_steps=len(loader)) in a "
        "4-epoch loop: the learning rate reaches 0 at step 100 of 400, and steps 100-400 "
        "(75 %) train at 0."
    ),
    fix=(
        "Size the schedule to the run: num_training_steps (T_max, total_steps) = epochs x "
        "len(loader) // gradient_accumulation_steps, the optimizer steps actually taken; call "
        "a per-step scheduler's step() after every optimizer.step(), not once an epoch (or "
        "size it in epochs); give warm-up in optimizer steps, a small share of the run."
    ),
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def zero_learning_rate(record: RunRecord) -> list[Finding]:
    """TRN012: per rank, a large share of the steps the curve covers train at a learning rate ~0."""
    base: dict[int | None, float] = {}
    plateau: set[int | None] = set()
    for obs in record.guard_observations:
        if obs.check == OBSERVATION:
            if obs.data.get("scheduler") == PLATEAU:
                plateau.add(obs.rank)
            value = obs.data.get("base_lr")
            if isinstance(value, (int, float)):
                base[obs.rank] = max(base.get(obs.rank, 0.0), float(value))
    by_rank: dict[int | None, list[Step]] = {}
    for step in record.of_type(Step):
        if step.step is not None and isinstance(step.metrics.get("lr"), (int, float)):
            by_rank.setdefault(step.rank, []).append(step)
    found: list[Finding] = []
    for rank, points in sorted(by_rank.items(), key=lambda item: -1 if item[0] is None else item[0]):
        points.sort(key=lambda s: int(s.step or 0))
        finding = _judge(rank, points, base.get(rank), rank in plateau)
        if finding is not None:
            found.append(finding)
    return found


RULES: tuple[Rule, ...] = (zero_learning_rate,)


def _judge(rank: int | None, points: list[Step], base: float | None, plateau: bool) -> Finding | None:
    lrs = [float(s.metrics["lr"]) for s in points]
    reference = max([*lrs, base or 0.0])
    cut = 0.0 if plateau else NEGLIGIBLE_FACTOR * reference
    spans: list[tuple[int, int, float]] = []  # (first step, last step, lr) of each window
    begin = 0
    for point, lr in zip(points, lrs, strict=True):
        end = int(point.step or 0)
        if end > begin:
            spans.append((begin + 1, end, lr))
            begin = end
    covered = sum(last - first + 1 for first, last, _ in spans)
    low = [(first, last, lr) for first, last, lr in spans if lr <= cut]
    at_zero = sum(last - first + 1 for first, last, _ in low)
    if len(low) < 2 or at_zero < MIN_STEPS or at_zero < ZERO_SHARE * covered:
        return None
    return _finding(rank, points, spans=spans, low=low, covered=covered, base=base, reference=reference)


def _finding(
    rank: int | None,
    points: list[Step],
    *,
    spans: list[tuple[int, int, float]],
    low: list[tuple[int, int, float]],
    covered: int,
    base: float | None,
    reference: float,
) -> Finding:
    at_zero = sum(last - first + 1 for first, last, _ in low)
    ranges = _ranges(low)
    _, peak_last, peak = max(spans, key=lambda s: s[2])
    main = max(ranges, key=lambda r: r[1] - r[0])
    exact = all(lr == 0.0 for _, _, lr in low)
    level = "0" if exact else f"under {NEGLIGIBLE_FACTOR:.1%} of {reference:.3g}"
    shape = _shape(spans, low, peak_last, peak)
    long = [r for r in ranges if r[1] - r[0] + 1 >= MIN_STEPS // 2] or [main]
    where = ", ".join(f"{a}-{b}" for a, b in long[:4]) + (" ..." if len(long) > 4 else "")
    message = (
        f"The learning rate was {level} on {at_zero} of {covered} optimizer steps "
        f"({at_zero / covered:.0%}; steps {where}): {shape}. Those steps ran and logged a loss "
        f"but did not train"
    )
    first_low = next(p for p in points if int(p.step or 0) >= main[0])
    return SPEC.finding(
        message,
        evidence={
            "steps_at_zero": at_zero,
            "steps_covered": covered,
            "share": round(at_zero / covered, 3),
            "ranges": ranges[:20],
            "base_lr": base,
            "peak_lr": peak,
            "peak_step": peak_last,
            "first_lr": spans[0][2],
            "last_lr": spans[-1][2],
            "lr_curve": _curve(spans),
            "thresholds": {
                "negligible_factor": NEGLIGIBLE_FACTOR,
                "share": ZERO_SHARE,
                "min_steps": MIN_STEPS,
            },
        },
        rank=rank,
        step=main[0],
        epoch=epoch_number(first_low.epoch),
    )


def _ranges(low: list[tuple[int, int, float]]) -> list[tuple[int, int]]:
    """The windows at ~0 as contiguous step ranges."""
    out: list[tuple[int, int]] = []
    for first, last, _ in low:
        if out and out[-1][1] + 1 == first:
            out[-1] = (out[-1][0], last)
        else:
            out.append((first, last))
    return out


def _shape(
    spans: list[tuple[int, int, float]], low: list[tuple[int, int, float]], peak_step: int, peak: float
) -> str:
    """The schedule in words: where it reached ~0 and what that points to."""
    total = spans[-1][1]
    if all(lr == 0.0 for _, _, lr in spans):
        return "the learning rate is 0 for the whole run (lr=0 given to the optimizer or the schedule)"
    after_peak = [s for s in low if s[0] > peak_step]
    if after_peak and sum(b - a + 1 for a, b, _ in after_peak) >= sum(b - a + 1 for a, b, _ in low) / 2:
        reached = after_peak[0][1]
        return (
            f"the schedule peaked at {peak:.3g} (step {peak_step}) and was ~0 by step {reached} of "
            f"{total}: it was sized for about {reached} steps, fewer than the run takes"
        )
    return (
        f"the learning rate was ~0 from the start and reached only {peak:.3g} by step {peak_step}: "
        f"a warm-up longer than the run, or a per-step schedule stepped once an epoch"
    )


def _curve(spans: list[tuple[int, int, float]]) -> list[tuple[int, float]]:
    """At most 20 points of the learning rate, evenly spaced over the run."""
    stride = max(1, len(spans) // 20)
    return [(last, lr) for _, last, lr in spans[::stride]][:20]
