"""trainmedic never changes the run it watches, and stays out of the way when off or broken.

The same seeded script runs bare, instrumented, with TRAINMEDIC_INSTRUMENT=0,
and with an events path that cannot be written (instrumentation fails at boot):
its output (final-weights digest, histories, the next random draws) must be
identical in all four, bit for bit. The four run at once (TensorFlow's start-up
dominates; on 2 cores this halves the wall time).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainmedic.eventlog.reader import read_events
from trainmedic.events import TrainingPlan
from trainmedic.instrument.channel import child_env
from trainmedic.record import RunRecord

from .conftest import line_env

SCRIPT = Path(__file__).with_name("seeded_fit.py")
# pytest-timeout counts a module fixture's setup in its first test: here several framework
# runs of up to 300 s each on a loaded CI machine.
pytestmark = pytest.mark.timeout(900)
LINE = "keras3-tensorflow"


def start(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(SCRIPT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )


@pytest.mark.slow
def test_seeded_fit_is_bit_identical_bare_instrumented_off_and_broken(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    variants = {
        "bare": {**os.environ, **line_env(LINE)},
        "watched": {**child_env(events), **line_env(LINE)},
        "off": {**child_env(tmp_path / "off.jsonl"), **line_env(LINE), "TRAINMEDIC_INSTRUMENT": "0"},
        "broken": {**child_env(events), **line_env(LINE), "TRAINMEDIC_EVENTS": "/dev/null/events.jsonl"},
    }
    variants["bare"].pop("TRAINMEDIC_EVENTS", None)
    procs = {name: start(env) for name, env in variants.items()}
    done = {name: (*proc.communicate(timeout=300), proc.returncode) for name, proc in procs.items()}

    bare_out, bare_err, bare_rc = done["bare"]
    assert bare_rc == 0, bare_err[-2000:]
    assert bare_out.startswith("weights ")
    for name in ("watched", "off", "broken"):
        out, err, rc = done[name]
        assert (rc, out) == (0, bare_out), f"{name}: {err[-2000:]}"

    record = RunRecord.of(read_events(events).events)
    assert len(record.of_type(TrainingPlan)) == 2  # it really was instrumented: both fits
    ends = [o for o in record.guard_observations if o.check == "keras_fit_end"]
    assert [o.data["epochs_run"] for o in ends] == [2, 2]
    # evaluate / predict called by the script are phases of their own, outside any epoch
    assert [s.phase for s in record.phase_spans if s.epoch is None] == ["eval", "predict"]
    assert "trainmedic" not in done["watched"][1]
    assert not (tmp_path / "off.jsonl").exists()
    assert "trainmedic" not in done["off"][1]
    assert "trainmedic: instrumentation disabled" in done["broken"][1]  # and it says why
