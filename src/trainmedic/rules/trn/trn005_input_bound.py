"""TRN005 `input-bound`: most of each step is spent waiting for the next batch.

Collector: the PyTorch guard (`trainmedic.torch`) times the DataLoader's `__next__` on every
step against the time between optimizer steps, and sends one `Step` per window with
`data_wait_s` and `duration_s` (per rank). `input_bound` judges each rank's median share.
"""

from __future__ import annotations

from trainmedic.events import Event, Step
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord, median
from trainmedic.rules._helpers.sampling import per_rank, sampling

# -- thresholds (documented in docs/torch.md) ---------------------------------------------------
# The median share of step time spent waiting for the next batch, and a floor on the wait
# itself (below 1 ms per step there is nothing worth a user's time to win).
INPUT_BOUND_SHARE = 0.5
INPUT_BOUND_MIN_WAIT_S = 1e-3
INPUT_BOUND_MIN_RECORDS = 3


def _example() -> list[Event]:
    """num_workers=0 with JPEG decoding: 70 ms of each 100 ms step wait for the next batch."""
    return [Step(t=float(i), pid=100, step=i, duration_s=0.1, data_wait_s=0.07) for i in range(1, 6)]


SPEC = FindingSpec(
    code="TRN005",
    slug="input-bound",
    severity=Severity.WARNING,
    title="Input-bound: steps wait for data",
    what="Most of each step is spent waiting for the next batch (data-loader bottleneck); the share is given.",
    why=(
        "The accelerator idles while the input pipeline works: the run takes longer for nothing. "
        "trainmedic times the DataLoader's __next__ on every step against the time between "
        "optimizer steps, and reports when the median share is 50% or more (and at least 1 ms)."
    ),
    example="DataLoader(num_workers=0) with JPEG decoding: 70% of each step waits for data.",
    fix="Raise num_workers, use pin_memory and prefetching, cache decoded data, or move augmentation to the device.",
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def input_bound(record: RunRecord) -> list[Finding]:
    """TRN005: most of each step is spent in the data loader's `__next__`."""
    timed = [
        s for s in record.steps if s.data_wait_s is not None and s.duration_s is not None and s.duration_s > 0
    ]
    found: list[Finding] = []
    for rank, steps in per_rank(timed).items():
        steady = steps[1:]  # the first window holds worker start-up and the first fetches
        if len(steady) < INPUT_BOUND_MIN_RECORDS:
            continue
        shares = [min(1.0, s.data_wait_s / s.duration_s) for s in steady]
        share = median(shares)
        wait = median([s.data_wait_s for s in steady])
        step_time = median([s.duration_s for s in steady])
        if share < INPUT_BOUND_SHARE or wait < INPUT_BOUND_MIN_WAIT_S:
            continue
        found.append(
            SPEC.finding(
                f"{share:.0%} of each training step was spent waiting for the next batch "
                f"({wait * 1e3:.1f} ms of {step_time * 1e3:.1f} ms per step)",
                evidence={
                    "data_wait_share": round(share, 3),
                    "median_wait_s_per_step": wait,
                    "median_step_s": step_time,
                    "steps": [steady[0].step, steady[-1].step],
                    "windows": len(steady),
                    "sampling": "every step timed; reported per window, " + sampling(record, rank),
                },
                rank=rank,
                step=steady[-1].step,
            )
        )
    return found


RULES: tuple[Rule, ...] = (input_bound,)
