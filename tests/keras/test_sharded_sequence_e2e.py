"""KER001 on a Sequence that keeps its data as `self.shards = [(x, y), ...]`, under the real `trainmedic run`.

A sharded loader whose `__len__` counts shards instead of batches: each epoch sees one batch
per shard. The fixed version counts the batches of every shard and stays quiet.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ..conftest import REPO, trainmedic_cmd
from .conftest import line_env

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

SCRIPT = """
import math, sys
import numpy as np
import keras

BATCH = 32

class Shards(keras.utils.PyDataset):
    def __init__(self, shards, batch_size):
        super().__init__()
        self.shards = shards  # [(x, y), ...]: one pair per file the data came in
        self.batch_size = batch_size

    def __len__(self):
        if sys.argv[1] == "bug":
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
keras.utils.set_random_seed(0)
model = keras.Sequential(
    [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)]
)
model.compile("adam", keras.losses.BinaryCrossentropy(from_logits=True))
history = model.fit(Shards(shards, BATCH), epochs=3, verbose=0)
print("trained", len(history.history["loss"]), "epochs")
"""


def supervise(variant: str, tmp: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    script = tmp / "sharded.py"
    out = tmp / variant
    env = {
        **os.environ,
        **line_env("keras3-torch"),
        "NO_COLOR": "1",
        "TRAINMEDIC_STATE_DIR": str(tmp / "state"),
    }
    env.pop("TRAINMEDIC_EVENTS", None)
    result = subprocess.run(
        [*trainmedic_cmd(), "run", "--quiet", "--out", str(out), "--", sys.executable, str(script), variant],
        capture_output=True,
        text=True,
        timeout=280,
        env=env,
        stdin=subprocess.DEVNULL,
        cwd=REPO,
        check=False,
    )
    path = out / "findings.json"
    found = {f["code"]: f for f in json.loads(path.read_text())["findings"]} if path.exists() else {}
    return result, found


@pytest.fixture(scope="module")
def runs(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[subprocess.CompletedProcess[str], dict]]:
    pytest.importorskip("keras")
    pytest.importorskip("torch")
    tmp = tmp_path_factory.mktemp("sharded")
    (tmp / "sharded.py").write_text(SCRIPT)
    with ThreadPoolExecutor(2) as pool:
        futures = {v: pool.submit(supervise, v, tmp) for v in ("bug", "fixed")}
        return {v: f.result() for v, f in futures.items()}


def test_shards_of_pairs_counted_as_batches_are_reported(runs: dict) -> None:
    result, found = runs["bug"]
    assert result.returncode == 0, result.stderr[-2000:]
    evidence = found["KER001"]["evidence"]
    assert (evidence["sequence_len"], evidence["samples"], evidence["expected_batches"]) == (4, 1280, 40)


def test_the_fixed_sharded_sequence_is_quiet(runs: dict) -> None:
    result, found = runs["fixed"]
    assert result.returncode == 0, result.stderr[-2000:]
    assert "KER001" not in found
    assert not {code for code, f in found.items() if f["severity"] != "info"}, found
