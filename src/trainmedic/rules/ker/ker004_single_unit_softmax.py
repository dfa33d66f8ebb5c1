"""KER004 `single-unit-softmax`: a softmax over an output of width 1.

Collector: the Keras integration (`trainmedic.keras._auto`'s patched `fit`, the explicit
`trainmedic.keras.Guard`) reads the built model's last layer (`trainmedic.keras._inspect.
describe_output`) when fit starts and observes `keras_output` with the `layer`, its
`layer_class`, `activation`, output width (`units`) and the compiled `loss`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmedic.events import Event, GuardObservation
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers.keras import integer, observations

#: The integration's observation of the built model's last layer.
OBSERVATION = "keras_output"


def _example() -> list[Event]:
    """A binary classifier whose head is Dense(1, activation="softmax"), seen when fit starts."""
    return [
        GuardObservation(
            t=1.0,
            pid=100,
            check=OBSERVATION,
            data={
                "layer": "dense_1",
                "layer_class": "Dense",
                "activation": "softmax",
                "units": 1,
                "loss": "binary_crossentropy",
            },
        )
    ]


SPEC = FindingSpec(
    code="KER004",
    slug="single-unit-softmax",
    severity=Severity.ERROR,
    title="Softmax over a single output unit",
    what=(
        "The model's output layer applies softmax over an output of width 1 (Dense(1, "
        "activation='softmax'), or a Softmax / Activation('softmax') layer after one unit). "
        "trainmedic reads the last layer's activation and the output width when fit starts."
    ),
    why=(
        "Softmax normalises over the last axis; over one unit it is exp(z) / exp(z) = 1.0 for "
        "every input and its gradient is 0. The model predicts the positive class everywhere, "
        "the loss stays where it started and the weights never change, while fit runs without "
        "an error (Keras 3 prints one UserWarning, easily lost in a long log)."
    ),
    example=(
        "model = keras.Sequential([..., keras.layers.Dense(1, activation='softmax')])\n"
        "model.compile(loss='binary_crossentropy', optimizer='adam')"
    ),
    fix=(
        "For a binary target use Dense(1, activation='sigmoid') with binary_crossentropy; for "
        "K classes use Dense(K, activation='softmax') with (sparse_)categorical_crossentropy."
    ),
    decided_in=("run events",),
    example_input=_example,
)


def is_single_unit_softmax(data: Mapping[str, Any]) -> bool:
    """True when the output layer's softmax normalises over a width of 1: a constant 1.0."""
    return data.get("activation") == "softmax" and integer(data, "units") == 1


def message(evidence: Mapping[str, Any]) -> str:
    loss = f" trained with {evidence['loss']}" if evidence.get("loss") else ""
    return (
        f"The output layer `{evidence.get('layer')}` ({evidence.get('layer_class')}) applies softmax "
        f"over 1 unit{loss}: its output is 1.0 for every input and no gradient flows "
        "back through it, so the model cannot learn"
    )


def single_unit_softmax(record: RunRecord) -> list[Finding]:
    found = []
    seen: set[tuple[int, object]] = set()  # one finding per layer and process, however many fits
    for obs in observations(record, OBSERVATION):
        data = obs.data
        if not is_single_unit_softmax(data) or (obs.pid, data.get("layer")) in seen:
            continue
        seen.add((obs.pid, data.get("layer")))
        evidence = {key: data.get(key) for key in ("layer", "layer_class", "activation", "units", "loss")}
        found.append(SPEC.finding(message(evidence), evidence=evidence, pid=obs.pid, rank=obs.rank))
    return found


RULES: tuple[Rule, ...] = (single_unit_softmax,)
