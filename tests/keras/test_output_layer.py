"""KER004 from the real instrumentation: the output layer is read when fit starts, or once fit built it.

A Sequential without `keras.Input` has no output until fit builds it; the head callback then
describes it at train begin, so `Dense(1, activation="softmax")` is found in either style.
One child process runs the four cases (TensorFlow starts once): the instrumentation patches
`keras.Model` for good, so it is installed once, a marker event before each case splits the
events, and the registry's rules run on each case's part alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .conftest import line_env

STYLES = ["input", "built-by-fit"]
ACTIVATIONS = ["softmax", "sigmoid"]
DRIVER = """
import json, sys
import numpy as np
import keras
from trainmedic.events import GuardObservation
from trainmedic.keras._auto import install
from trainmedic.record import RunRecord
from trainmedic.registry import run_rules

MARK = "test_case"
events = []
install(keras, sink=events.append)
for case in sys.argv[1:]:
    style, activation = case.split(":")
    events.append(GuardObservation(check=MARK, data={"case": case}))
    head = keras.layers.Dense(1, activation=activation)
    layers = [keras.layers.Dense(8, activation="relu"), head]
    if style == "input":
        layers.insert(0, keras.Input((4,)))
    model = keras.Sequential(layers)
    model.compile(optimizer="adam", loss="binary_crossentropy")
    rng = np.random.default_rng(0)
    model.fit(rng.normal(size=(64, 4)), (rng.random(64) < 0.5).astype("float32"), epochs=1, verbose=0)

parts = {}
for event in events:
    if isinstance(event, GuardObservation) and event.check == MARK:
        current = parts.setdefault(event.data["case"], [])
    else:
        current.append(event)
messages = {
    case: [f.message for f in run_rules(RunRecord.of(part)) if f.code == "KER004"]
    for case, part in parts.items()
}
print("RESULT " + json.dumps(messages))
"""


@pytest.fixture(scope="module")
def messages() -> dict[str, list[str]]:
    """KER004's messages per `style:activation` case, from one child running all four."""
    env = {**os.environ, **line_env("keras3-tensorflow"), "TRAINMEDIC_INSTRUMENT": "0"}
    cases = [f"{style}:{activation}" for style in STYLES for activation in ACTIVATIONS]
    result = subprocess.run(
        [sys.executable, "-c", DRIVER, *cases],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    (line,) = [ln for ln in result.stdout.splitlines() if ln.startswith("RESULT ")]
    found: dict[str, list[str]] = json.loads(line.removeprefix("RESULT "))
    assert sorted(found) == sorted(cases), found
    return found


@pytest.mark.slow
@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_single_unit_softmax_found_whether_or_not_fit_builds_the_model(
    messages: dict[str, list[str]], style: str, activation: str
) -> None:
    found = messages[f"{style}:{activation}"]
    if activation == "sigmoid":
        assert found == []
    else:
        assert len(found) == 1
        assert "applies softmax over 1 unit trained with binary_crossentropy" in found[0]
