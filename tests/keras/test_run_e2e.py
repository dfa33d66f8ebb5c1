"""The Keras examples under the real `trainmedic run`, OOM ones under a real memory limit.

Six supervised runs, started at once (TensorFlow's start-up dominates):
- the epoch-end metric of eval_memory_spike.py is OOM-killed under 1G at the first
  epoch end; its fixed version (Deferred, streamed) finishes under the same limit;
- sequence_len_huge.py with a finite 10**9 length: bare (--no-instrument) the index
  list grows until the 2G limit kills it; instrumented, fit is stopped first (KER002);
- Keras 3 input exhaustion: exit 0, every epoch ran 4 of 10 steps (RUN005);
- the healthy example: no warning, no error.
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

EXAMPLES = REPO / "examples" / "keras"
# pytest-timeout counts a module fixture's setup in its first test: here several framework
# runs of up to 300 s each on a loaded CI machine.
pytestmark = [pytest.mark.timeout(900), pytest.mark.heavy]
HUGE = ["--length", "1000000000"]
RUNS: dict[str, list[str]] = {
    "spike": ["--memory-limit", "1G", "--", sys.executable, str(EXAMPLES / "eval_memory_spike.py")],
    "spike_fixed": [
        "--memory-limit",
        "1G",
        "--",
        sys.executable,
        str(EXAMPLES / "eval_memory_spike_fixed.py"),
    ],
    "huge_bare": [
        "--no-instrument",
        "--memory-limit",
        "2G",
        "--",
        sys.executable,
        str(EXAMPLES / "sequence_len_huge.py"),
        *HUGE,
    ],
    "huge": ["--memory-limit", "2G", "--", sys.executable, str(EXAMPLES / "sequence_len_huge.py"), *HUGE],
    "exhausted": ["--", sys.executable, str(EXAMPLES / "input_exhausted.py")],
    "healthy": ["--", sys.executable, str(EXAMPLES / "healthy.py")],
}


def supervise(
    name: str, args: list[str], tmp: Path
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    out = tmp / name
    env = {
        **os.environ,
        **line_env("keras3-tensorflow"),
        "NO_COLOR": "1",
        "TRAINMEDIC_STATE_DIR": str(tmp / "state"),
    }
    env.pop("TRAINMEDIC_EVENTS", None)
    result = subprocess.run(
        [*trainmedic_cmd(), "run", "--quiet", "--grace", "2", "--out", str(out), *args],
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
    tmp = tmp_path_factory.mktemp("keras-run")
    with ThreadPoolExecutor(3) as pool:
        futures = {name: pool.submit(supervise, name, args, tmp) for name, args in RUNS.items()}
        done = {name: future.result() for name, future in futures.items()}
    for result, _ in done.values():
        if result.returncode == 2 and "memory cgroup" in result.stderr:
            pytest.skip(result.stderr.strip())  # not root / no delegated cgroup on this machine
    return done


@pytest.mark.slow
@pytest.mark.cgroup
def test_epoch_end_metric_is_oom_killed_and_the_fix_survives(runs: dict) -> None:
    result, found = runs["spike"]
    assert result.returncode == 137, result.stderr[-2000:]
    oom = found["RUN001"]
    assert oom["evidence"]["phase"] in {"epoch_end", "predict"}  # the epoch-end metric, not training
    assert oom["evidence"]["epoch"] in {0, 1}
    fixed, fixed_found = runs["spike_fixed"]
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    assert "(once, after training)" in fixed.stdout
    assert not {code for code, f in fixed_found.items() if f["severity"] != "info"}


@pytest.mark.slow
@pytest.mark.cgroup
def test_huge_length_is_an_oom_bare_and_stopped_with_its_fix_instrumented(runs: dict) -> None:
    bare, bare_found = runs["huge_bare"]
    assert bare.returncode == 137, bare.stderr[-2000:]
    assert "RUN001" in bare_found
    watched, found = runs["huge"]
    assert watched.returncode == 1, watched.stderr[-2000:]
    assert "SequenceLenHugeError: trainmedic KER002 sequence-len-huge" in watched.stderr
    assert found["KER002"]["evidence"]["sequence_len"] == 10**9
    assert "LoopingSequence" in found["KER002"]["fix"]
    assert "RUN001" not in found


@pytest.mark.slow
def test_keras3_input_exhaustion_is_reported_though_all_epochs_ran(runs: dict) -> None:
    result, found = runs["exhausted"]
    assert result.returncode == 0, result.stderr[-2000:]
    assert "trained 3 of 3 epochs" in result.stdout
    assert "RUN005" in found
    assert not {"KER003", "RUN004"} & set(found)


@pytest.mark.slow
def test_healthy_example_is_quiet_under_run(runs: dict) -> None:
    result, found = runs["healthy"]
    assert result.returncode == 0, result.stderr[-2000:]
    assert not {code for code, f in found.items() if f["severity"] != "info"}, found
