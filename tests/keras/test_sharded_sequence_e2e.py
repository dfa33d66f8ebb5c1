"""KER001 on a Sequence that keeps its data as `self.shards = [(x, y), ...]`, under the real `trainmedic run`.

A sharded loader whose `__len__` counts shards instead of batches: each epoch sees one batch
per shard. The fixed version counts the batches of every shard and stays quiet. One supervised
run trains both versions in turn (Keras and torch start once); a marker event before each
splits the run's events, and the registry's rules run on each version's part alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import pytest

from trainmedic.eventlog.reader import read_events
from trainmedic.findings import Finding, Severity
from trainmedic.record import RunRecord
from trainmedic.registry import run_rules

from ..conftest import REPO, trainmedic_cmd
from ..helpers import records_by_case
from .conftest import line_env

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]
VARIANTS = ("bug", "fixed")

SCRIPT = """
import math, sys
import numpy as np
import keras
from trainmedic.events import GuardObservation
from trainmedic.instrument import channel

BATCH = 32

class Shards(keras.utils.PyDataset):
    def __init__(self, shards, batch_size, variant):
        super().__init__()
        self.variant = variant
        self.shards = shards  # [(x, y), ...]: one pair per file the data came in
        self.batch_size = batch_size

    def __len__(self):
        if self.variant == "bug":
            return len(self.shards)  # the bug: one batch per shard
        return sum(math.ceil(len(x) / BATCH) for x, _ in self.shards)

    def __getitem__(self, i):
        for x, y in self.shards:
            n = math.ceil(len(x) / BATCH)
            if i < n:
                return x[i * BATCH:(i + 1) * BATCH], y[i * BATCH:(i + 1) * BATCH]
            i -= n
        raise IndexError(i)

rng = np.random.default_rng(0)
shards = []
for _ in range(4):
    x = rng.normal(size=(320, 8)).astype("float32")
    shards.append((x, (x.sum(axis=1, keepdims=True) > 0).astype("float32")))
for variant in sys.argv[1:]:
    channel.emit(GuardObservation(check="example_start", data={"case": variant}))
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
    )
    model.compile("adam", keras.losses.BinaryCrossentropy(from_logits=True))
    history = model.fit(Shards(shards, BATCH, variant), epochs=3, verbose=0)
    print(variant, "trained", len(history.history["loss"]), "epochs", flush=True)
channel.emit(GuardObservation(check="example_start", data={"case": "<end>"}))
"""


@dataclass(frozen=True)
class SupervisedRun:
    result: subprocess.CompletedProcess[str]
    found: dict[str, Any]  # findings.json of the whole run, by code
    parts: dict[str, RunRecord]  # the run's events per version


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> SupervisedRun:
    """Both versions, one after the other, in one supervised run."""
    pytest.importorskip("keras")
    pytest.importorskip("torch")
    tmp = tmp_path_factory.mktemp("sharded")
    script = tmp / "sharded.py"
    script.write_text(SCRIPT)
    out = tmp / "run"
    env = {
        **os.environ,
        **line_env("keras3-torch"),
        "NO_COLOR": "1",
        "TRAINMEDIC_STATE_DIR": str(tmp / "state"),
    }
    env.pop("TRAINMEDIC_EVENTS", None)
    result = subprocess.run(
        [
            *trainmedic_cmd(),
            "run",
            "--quiet",
            "--out",
            str(out),
            "--",
            sys.executable,
            str(script),
            *VARIANTS,
        ],
        capture_output=True,
        text=True,
        timeout=400,
        env=env,
        stdin=subprocess.DEVNULL,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    found = {f["code"]: f for f in json.loads((out / "findings.json").read_text())["findings"]}
    parts = records_by_case(RunRecord.of(read_events(out / "events.jsonl").events))
    return SupervisedRun(result, found, parts)


def part_findings(run: SupervisedRun, variant: str) -> dict[str, Finding]:
    assert f"{variant} trained 3 epochs" in run.result.stdout, run.result.stdout
    return {f.code: f for f in run_rules(run.parts[variant])}


def test_shards_of_pairs_counted_as_batches_are_reported(run: SupervisedRun) -> None:
    evidence = part_findings(run, "bug")["KER001"].evidence
    assert (evidence["sequence_len"], evidence["samples"], evidence["expected_batches"]) == (4, 1280, 40)
    # the supervisor's own report of the run: this KER001, and no other warning or error
    assert run.found["KER001"]["evidence"] == json.loads(json.dumps(evidence))
    assert {code for code, f in run.found.items() if f["severity"] != "info"} == {"KER001"}, run.found


def test_the_fixed_sharded_sequence_is_quiet(run: SupervisedRun) -> None:
    found = part_findings(run, "fixed")
    assert "KER001" not in found
    assert not {code for code, f in found.items() if f.severity != Severity.INFO}, found
