"""What the KER findings share: the Keras integration's observations and how to read them.

The Keras integration (auto-instrumentation under `trainmedic run`, or
`trainmedic.keras.Guard`) describes every `fit` call with observations:
`keras_input` (what fit was given: sequence length, samples, batch size,
steps_per_epoch, shuffle, memory available) before the adapter touches the data,
`keras_output` (the last layer of a built model: its activation and output width;
KER004's) and `keras_fit_end` (epochs requested and run, what stopped training;
KER003's). `Epoch` events carry the batches each epoch really ran.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from trainmedic.events import Epoch, Event, GuardObservation
from trainmedic.evidence.observations import KERAS_INPUT
from trainmedic.record import RunRecord


def fit_input(**data: Any) -> list[Event]:
    """The `keras_input` observation of one fit over a Sequence (PID 100), for examples."""
    described = {"is_sequence": True, "input_type": "Batches", "input_class": "train.Batches", **data}
    return [GuardObservation(t=1.0, pid=100, check=KERAS_INPUT, data=described)]


def observations(record: RunRecord, check: str) -> list[GuardObservation]:
    return [o for o in record.guard_observations if o.check == check]


def epochs_after(record: RunRecord, obs: GuardObservation) -> list[Epoch]:
    """Epoch events of the fit `obs` describes: same process, until its next fit began."""
    later = [o.t for o in observations(record, KERAS_INPUT) if o.pid == obs.pid and o.t > obs.t]
    until = min(later, default=math.inf)
    return [e for e in record.of_type(Epoch) if e.pid == obs.pid and obs.t <= e.t < until]


def integer(data: Mapping[str, Any], key: str) -> int | None:
    """`data[key]` when it is an int (not a bool), else None."""
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None
