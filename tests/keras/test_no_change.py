"""trainmedic never changes the run it watches, and stays out of the way when off or broken.

The same seeded script runs bare, instrumented, with TRAINMEDIC_INSTRUMENT=0,
and with an events path that cannot be written (instrumentation fails at boot):
its output (final-weights digest, histories, the next random draws) must be
identical in all four, bit for bit.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainmedic.events import TrainingPlan

from ..helpers import run_instrumented
from .conftest import line_env

SCRIPT = Path(__file__).with_name("seeded_fit.py")
LINE = "keras3-tensorflow"


@pytest.mark.slow
def test_seeded_fit_is_bit_identical_bare_instrumented_off_and_broken(tmp_path: Path) -> None:
    env = {**os.environ, **line_env(LINE)}
    bare = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=240, check=False
    )
    assert bare.returncode == 0, bare.stderr[-2000:]
    assert bare.stdout.startswith("weights ")

    watched = run_instrumented(["python", str(SCRIPT)], tmp_path / "on", env=line_env(LINE), timeout=240)
    assert (watched.result.returncode, watched.result.stdout) == (0, bare.stdout)
    assert len(watched.record.of_type(TrainingPlan)) == 2  # it really was instrumented: both fits
    ends = [o for o in watched.record.guard_observations if o.check == "keras_fit_end"]
    assert [o.data["epochs_run"] for o in ends] == [2, 2]
    assert "trainmedic" not in watched.result.stderr

    off = run_instrumented(
        ["python", str(SCRIPT)], tmp_path / "off", env={**line_env(LINE), "TRAINMEDIC_INSTRUMENT": "0"}
    )
    assert (off.result.returncode, off.result.stdout) == (0, bare.stdout)
    assert off.record.events == []
    assert "trainmedic" not in off.result.stderr

    broken = run_instrumented(
        ["python", str(SCRIPT)],
        tmp_path / "broken",
        env={**line_env(LINE), "TRAINMEDIC_EVENTS": "/dev/null/events.jsonl"},
    )
    assert (broken.result.returncode, broken.result.stdout) == (0, bare.stdout)
    assert "trainmedic: instrumentation disabled" in broken.result.stderr  # and says why
