"""What TRL's RL trainers (GRPO, RLOO) log, as the HF guard sends it: one `rl_metrics`
observation a training log, read by TRN015-TRN017.

The guard copies, from the dict TRL's `log()` passes to the callbacks, the metrics these
trainers compute anyway (`reward`, `reward_std`, `frac_reward_zero_std`, `kl`,
`completions/mean_length`, `completions/clipped_ratio`, `rewards/<name>/mean`...), each an
average over the steps since the previous log, and the configuration that gives them a
scale (`num_generations`, `max_completion_length`, `beta`). Pure: no framework, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from trainmedic.events import Event, GuardObservation
from trainmedic.evidence.observations import RL_METRICS
from trainmedic.record import RunRecord


def rl_logs(record: RunRecord) -> dict[int | None, list[GuardObservation]]:
    """The RL trainers' training logs per rank, in step order."""
    by_rank: dict[int | None, list[GuardObservation]] = {}
    for obs in record.guard_observations:
        if obs.check == RL_METRICS:
            by_rank.setdefault(obs.rank, []).append(obs)
    for reads in by_rank.values():
        reads.sort(key=lambda o: o.step or 0)
    return by_rank


def by_rank_order(item: tuple[int | None, object]) -> int:
    return -1 if item[0] is None else item[0]


def metric(obs: GuardObservation, key: str) -> float | None:
    """One logged metric of a read, if it is a finite number."""
    value = obs.data.get("metrics", {}).get(key)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def series(reads: Sequence[GuardObservation], key: str) -> list[tuple[int, float]]:
    """(step, value) of `key` over the reads that logged it."""
    points = []
    for obs in reads:
        value = metric(obs, key)
        if value is not None:
            points.append((obs.step or 0, value))
    return points


def config(reads: Sequence[GuardObservation], key: str) -> object:
    """The trainer's configuration value `key` (as its last read gave it)."""
    for obs in reversed(reads):
        value = obs.data.get("config", {}).get(key)
        if value is not None:
            return value
    return None


def trainer_name(reads: Sequence[GuardObservation]) -> str:
    name = config(reads, "trainer")
    return name if isinstance(name, str) else "the RL trainer"


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def quarters(values: Sequence[float]) -> tuple[list[float], list[float]]:
    """The first and the last quarter of `values` (at least one value each)."""
    size = max(1, len(values) // 4)
    return list(values[:size]), list(values[-size:])


def example_logs(rows: Sequence[dict[str, float]], config_values: dict[str, object]) -> list[Event]:
    """Spec examples: one read a row of metrics, a log every 10 steps."""
    return [
        GuardObservation(
            t=float(i),
            pid=100,
            check=RL_METRICS,
            step=10 * (i + 1),
            data={"metrics": dict(row), "config": config_values},
        )
        for i, row in enumerate(rows)
    ]
