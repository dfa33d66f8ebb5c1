"""Scripts of benchmarks/foreign/ (Keras, PyTorch) with one realistic bug each, under the real
`trainmedic run`: the finding the bug deserves, with the evidence the issue asked for.

Five supervised runs, three at a time (TensorFlow's start-up dominates):
- Keras Sequential, labels shuffled apart from the images: loss at ln 10 (TRN003, chance level
  from the compiled loss and the output width);
- a PyDataset whose __len__ counts its 8 shards (KER001, samples found inside the list);
- an epoch-end callback that predicts the whole set at once, under a 900M limit (RUN001 with
  RUN003 at the limit);
- a learning-rate schedule that grows: the loss ends far above its start, all finite (TRN002);
- an LSTM LM without clipping at 16x the learning rate, then math.exp(val_loss) (RUN009
  naming TRN002).
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
from ..keras.conftest import line_env

FOREIGN = REPO / "benchmarks" / "foreign"
RUNS: dict[str, list[str]] = {
    "chance": [str(FOREIGN / "keras" / "sequential_mnist.py"), "--bug", "shuffled-labels", "--epochs", "3"],
    "shards": [str(FOREIGN / "keras" / "sharded_pydataset.py"), "--bug", "len-shards"],
    "predict_oom": [str(FOREIGN / "keras" / "callback_predict.py"), "--bug", "whole-set"],
    "lr_grows": [str(FOREIGN / "keras" / "functional_regression.py"), "--bug", "lr-grows"],
    "lm_overflow": [str(FOREIGN / "torch" / "word_lm_overflow.py"), "--bug", "scaled-lr"],
}
LIMITS = {"predict_oom": ["--memory-limit", "900M"]}


def supervise(name: str, tmp: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    out = tmp / name
    env = {
        **os.environ,
        **line_env("keras3-tensorflow"),
        "NO_COLOR": "1",
        "TRAINMEDIC_STATE_DIR": str(tmp / "s"),
    }
    env.pop("TRAINMEDIC_EVENTS", None)
    result = subprocess.run(
        [
            *trainmedic_cmd(),
            "run",
            "--quiet",
            "--grace",
            "2",
            "--out",
            str(out),
            *LIMITS.get(name, []),
            "--",
            sys.executable,
            *RUNS[name],
        ],
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
    tmp = tmp_path_factory.mktemp("foreign-run")
    with ThreadPoolExecutor(3) as pool:
        futures = {name: pool.submit(supervise, name, tmp) for name in RUNS}
        return {name: future.result() for name, future in futures.items()}


def warnings_and_errors(found: dict[str, Any]) -> set[str]:
    return {code for code, f in found.items() if f["severity"] != "info"}


@pytest.mark.slow
def test_shuffled_labels_sit_at_chance_level(runs: dict) -> None:
    result, found = runs["chance"]
    assert result.returncode == 0, result.stderr[-2000:]
    assert warnings_and_errors(found) == {"TRN003"}
    assert "over 3 epochs" in found["TRN003"]["message"]
    evidence = found["TRN003"]["evidence"]
    assert evidence["classes"] == 10
    assert "categorical_crossentropy" in evidence["classes_from"]
    assert "chance ln 10 = 2.303" in found["TRN003"]["message"]


@pytest.mark.slow
def test_a_len_that_counts_shards_is_too_short(runs: dict) -> None:
    result, found = runs["shards"]
    assert result.returncode == 0, result.stderr[-2000:]
    assert warnings_and_errors(found) == {"KER001"}
    assert found["KER001"]["evidence"]["samples"] == 4096
    assert found["KER001"]["evidence"]["sequence_len"] == 8


@pytest.mark.slow
@pytest.mark.cgroup
def test_predict_in_an_epoch_end_callback_is_a_spike_and_the_kill(runs: dict) -> None:
    result, found = runs["predict_oom"]
    if result.returncode == 2 and "memory cgroup" in result.stderr:
        pytest.skip(result.stderr.strip())
    assert result.returncode == 137, result.stderr[-2000:]
    assert found["RUN001"]["evidence"]["phase"] in {"predict", "epoch_end"}
    assert found["RUN003"]["evidence"]["phase"] in {"predict", "epoch_end"}


@pytest.mark.slow
def test_a_growing_learning_rate_is_a_divergence(runs: dict) -> None:
    result, found = runs["lr_grows"]
    assert result.returncode == 0, result.stderr[-2000:]
    assert "TRN002" in found
    assert "TRN001" not in found  # all finite


@pytest.mark.slow
def test_an_overflow_after_a_short_explosion_names_it(runs: dict) -> None:
    result, found = runs["lm_overflow"]
    assert result.returncode == 1, result.stderr[-2000:]
    assert "OverflowError" in result.stderr
    assert found["RUN009"]["evidence"]["likely_cause"]["code"] == "TRN002"
    assert found["TRN002"]["step"] == 10
