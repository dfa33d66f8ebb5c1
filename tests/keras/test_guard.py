"""Guard, LoopingSequence and Deferred on every Keras line, without the supervisor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from .conftest import LINES, line_env

SCRIPT = Path(__file__).with_name("guard_scenarios.py")
# pytest-timeout counts a module fixture's setup in its first test: here several framework
# runs of up to 300 s each on a loaded CI machine.
pytestmark = pytest.mark.timeout(900)


def run_scenarios(line: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **line_env(line)}
    env.pop("TRAINMEDIC_EVENTS", None)  # no supervisor: the Guard works alone
    return subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=300, check=False
    )


@pytest.fixture(scope="module")
def all_lines() -> dict[str, subprocess.CompletedProcess[str]]:
    """The scenarios on every Keras line, the three at once (TensorFlow's start-up dominates)."""
    with ThreadPoolExecutor(len(LINES)) as pool:
        return dict(zip(LINES, pool.map(run_scenarios, LINES), strict=True))


@pytest.fixture(params=sorted(LINES))
def scenarios(
    request: pytest.FixtureRequest, all_lines: dict[str, subprocess.CompletedProcess[str]]
) -> tuple[str, dict[str, Any]]:
    result = all_lines[request.param]
    assert result.returncode == 0, result.stderr[-3000:]
    (line_out,) = [ln for ln in result.stdout.splitlines() if ln.startswith("RESULT ")]
    return request.param, json.loads(line_out.removeprefix("RESULT "))


@pytest.mark.slow
def test_guard_reports_a_short_sequence_with_its_fix(scenarios: tuple[str, dict[str, Any]]) -> None:
    _, out = scenarios
    assert out["short"]["codes"] == ["KER001"]
    assert out["short"]["printed"].startswith(
        "trainmedic: KER001 sequence-too-short: Batches yields 1 batches"
    )
    assert "fix: Make __len__ return math.ceil" in out["short"]["printed"]


@pytest.mark.slow
def test_guard_accepts_early_stopping(scenarios: tuple[str, dict[str, Any]]) -> None:
    _, out = scenarios
    assert out["early_stop"] == {"codes": [], "epochs": 2}


@pytest.mark.slow
def test_guard_sees_input_exhaustion_as_each_line_behaves(scenarios: tuple[str, dict[str, Any]]) -> None:
    line, out = scenarios
    ker = [c for c in out["exhausted"]["codes"] if c.startswith("KER")]
    if line == "tf-keras":  # legacy: fit returns after 1 epoch
        assert (ker, out["exhausted"]["epochs"], out["exhausted"]["steps"]) == (["KER003"], 1, [4])
    else:  # Keras 3: every epoch runs 4 of 10 steps
        assert (ker, out["exhausted"]["epochs"], out["exhausted"]["steps"]) == ([], 3, [4, 4, 4])


@pytest.mark.slow
def test_guard_stops_a_huge_sequence_where_it_runs_in_time(scenarios: tuple[str, dict[str, Any]]) -> None:
    line, out = scenarios
    # Keras 3 on torch builds the index list before any callback runs (a MemoryError at once):
    # only `trainmedic run` (which checks before fit) or check_sequence get ahead of it there.
    expected = "MemoryError" if line == "keras3-torch" else "SequenceLenHugeError: KER002"
    assert out["huge"] == expected


@pytest.mark.slow
def test_looping_sequence_trains_by_steps_and_counts_real_passes(
    scenarios: tuple[str, dict[str, Any]],
) -> None:
    line, out = scenarios
    looping = out["looping"]
    assert looping["len"] == 12
    assert looping["steps"] == [4, 4, 4]
    assert looping["codes"] == []
    # plus what Keras peeks at for the input signature and what its prefetching reads ahead
    assert 12 <= looping["served"] <= 2 * 12
    assert looping["inner_epoch_ends"] == looping["served"] // 4  # once per pass over the 4 real batches
    if line != "tf-keras":
        assert out["looping_threads"] == {"workers": 2, "epochs": 2}
        assert out["looping_processes"] == {"multiprocessing": True, "epochs": 2}


@pytest.mark.slow
def test_deferred_runs_every_k_epochs_and_once_at_the_end(scenarios: tuple[str, dict[str, Any]]) -> None:
    _, out = scenarios
    assert out["deferred"] == {"every2": [1, 3, 4], "end_only": [4]}
