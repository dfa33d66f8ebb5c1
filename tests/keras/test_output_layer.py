"""KER004 from the real instrumentation: the output layer is read when fit starts, or once fit built it.

A Sequential without `keras.Input` has no output until fit builds it; the head callback then
describes it at train begin, so `Dense(1, activation="softmax")` is found in either style.
Each case runs in a child process (the instrumentation patches `keras.Model` for good).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .conftest import line_env

DRIVER = """
import json, sys
import numpy as np
import keras
from trainmedic.keras._auto import install
from trainmedic.record import RunRecord
from trainmedic.registry import run_rules

events = []
install(keras, sink=events.append)
head = keras.layers.Dense(1, activation=sys.argv[2])
layers = [keras.layers.Dense(8, activation="relu"), head]
if sys.argv[1] == "input":
    layers.insert(0, keras.Input((4,)))
model = keras.Sequential(layers)
model.compile(optimizer="adam", loss="binary_crossentropy")
rng = np.random.default_rng(0)
model.fit(rng.normal(size=(64, 4)), (rng.random(64) < 0.5).astype("float32"), epochs=1, verbose=0)
found = [f for f in run_rules(RunRecord.of(events)) if f.code == "KER004"]
print(json.dumps([f.message for f in found]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("style", ["input", "built-by-fit"])
@pytest.mark.parametrize("activation", ["softmax", "sigmoid"])
def test_single_unit_softmax_found_whether_or_not_fit_builds_the_model(style: str, activation: str) -> None:
    env = {**os.environ, **line_env("keras3-tensorflow"), "TRAINMEDIC_INSTRUMENT": "0"}
    result = subprocess.run(
        [sys.executable, "-c", DRIVER, style, activation],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    messages = json.loads(result.stdout.strip().splitlines()[-1])
    if activation == "sigmoid":
        assert messages == []
    else:
        assert len(messages) == 1
        assert "applies softmax over 1 unit trained with binary_crossentropy" in messages[0]
