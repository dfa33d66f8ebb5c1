"""Every Keras example, instrumented, on every Keras line: exactly its expected findings.

One child interpreter per Keras line runs all examples (TensorFlow starts once);
a marker event before each example splits the events, and the registry's rules
run on each part as they would on a supervised run of that script alone.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from trainmedic.events import Epoch, Event, GuardObservation, PhaseStart, TrainingPlan
from trainmedic.findings import Finding, Severity
from trainmedic.record import RunRecord
from trainmedic.registry import run_rules

from ..helpers import InstrumentedRun, run_instrumented
from .conftest import LINES, line_env

REPO = Path(__file__).resolve().parents[2]
# pytest-timeout counts a module fixture's setup in its first test: here several framework
# runs of up to 300 s each on a loaded CI machine.
pytestmark = [pytest.mark.timeout(900), pytest.mark.heavy]
EXAMPLES = REPO / "examples" / "keras"
DRIVER = Path(__file__).with_name("example_driver.py")
SMALL_EVAL = "--eval-mb=8"  # the spike's shape without its size: memory is the supervisor's to judge

SPECS = [
    "healthy.py",
    "sequence_too_short.py",
    "sequence_too_short_fixed.py",
    "sequence_len_huge.py",
    "sequence_len_huge_fixed.py",
    "input_exhausted.py",
    "input_exhausted.py::--generator",
    "input_exhausted_fixed.py",
    f"eval_memory_spike.py::{SMALL_EVAL}",
    f"eval_memory_spike_fixed.py::{SMALL_EVAL}",
]
# KER findings each example must produce, per line (exactly these KER codes).
EXPECTED_KER: dict[str, dict[str, set[str]]] = {
    line: {
        "sequence_too_short.py": {"KER001"},
        "sequence_len_huge.py": {"KER002"},
        "input_exhausted.py": {"KER003"} if line == "tf-keras" else set(),
        "input_exhausted.py::--generator": {"KER003"} if line == "tf-keras" else set(),
    }
    for line in LINES
}
# RUN findings the supervisor's rules may add from these events (input exhaustion, silent early exit).
ALLOWED_RUN = {
    "input_exhausted.py": {"RUN004", "RUN005"},
    "input_exhausted.py::--generator": {"RUN004", "RUN005"},
}


@pytest.fixture(scope="module")
def all_lines(tmp_path_factory: pytest.TempPathFactory) -> dict[str, InstrumentedRun]:
    """The driver on every Keras line, the three at once (TensorFlow's start-up dominates)."""

    def run(line: str) -> InstrumentedRun:
        return run_instrumented(
            ["python", str(DRIVER), *[str(EXAMPLES / spec) for spec in SPECS]],
            tmp_path_factory.mktemp(line),
            env=line_env(line),
            cwd=REPO,
            timeout=280,
        )

    with ThreadPoolExecutor(len(LINES)) as pool:
        return dict(zip(LINES, pool.map(run, LINES), strict=True))


@pytest.fixture(params=sorted(LINES))
def line_run(request: pytest.FixtureRequest, all_lines: dict[str, InstrumentedRun]):
    run = all_lines[request.param]
    assert run.result.returncode == 0, run.result.stderr[-3000:]
    return request.param, run


def split(run: InstrumentedRun) -> dict[str, list[Event]]:
    parts: dict[str, list[Event]] = {}
    current: list[Event] | None = None
    for event in run.record.events:
        if isinstance(event, GuardObservation) and event.check == "test_example":
            current = parts.setdefault(Path(event.data["spec"]).name, [])
        elif current is not None:
            current.append(event)
    return parts


def findings_of(events: list[Event]) -> list[Finding]:
    return run_rules(RunRecord.of(events))


@pytest.mark.slow
@pytest.mark.parametrize("spec", SPECS)
def test_example_produces_exactly_its_findings(line_run: tuple[str, InstrumentedRun], spec: str) -> None:
    line, run = line_run
    assert f"EXAMPLE-DONE {EXAMPLES / spec}" in run.result.stdout
    found = findings_of(split(run)[spec])
    ker = {f.code for f in found if f.code.startswith("KER")}
    assert ker == EXPECTED_KER[line].get(spec, set()), [f.message for f in found]
    others = {f.code for f in found if not f.code.startswith("KER") and f.severity != Severity.INFO}
    assert others <= ALLOWED_RUN.get(spec, set()), [f.message for f in found]


@pytest.mark.slow
def test_events_carry_what_the_run_rules_need(line_run: tuple[str, InstrumentedRun]) -> None:
    line, run = line_run
    parts = split(run)
    # Input exhausted: the plan says 10 steps per epoch; the epochs say what really ran.
    exhausted = RunRecord.of(parts["input_exhausted.py"])
    (plan,) = exhausted.of_type(TrainingPlan)
    assert (plan.framework, plan.epochs, plan.steps_per_epoch) == (line, 3, 10)
    steps = [e.steps for e in exhausted.of_type(Epoch)]
    assert steps == ([4] if line == "tf-keras" else [4, 4, 4])  # legacy stops; Keras 3 runs short epochs
    # Phases: train, validation inside fit, the epoch-end callbacks, and a predict inside them.
    healthy = RunRecord.of(parts["healthy.py"])
    assert [s.phase for s in healthy.phase_spans[:3]] == ["train", "eval", "epoch_end"]
    assert all(s.end is not None for s in healthy.phase_spans)
    spike = RunRecord.of(parts[f"eval_memory_spike.py::{SMALL_EVAL}"])
    for span in (s for s in spike.phase_spans if s.phase == "predict"):
        assert spike.phase_at(span.start) == "predict"
        outer = [s for s in spike.phase_spans if s.phase == "epoch_end" and s.start <= span.start]
        assert outer
        assert outer[-1].end is not None
        assert span.end is not None
        assert span.end <= outer[-1].end
    assert len([s for s in spike.phase_spans if s.phase == "predict"]) == 3
    fixed = RunRecord.of(parts[f"eval_memory_spike_fixed.py::{SMALL_EVAL}"])
    assert [e.phase for e in fixed.of_type(PhaseStart)].count("eval") == 3  # light val_loss only


@pytest.mark.slow
def test_huge_sequence_is_stopped_before_the_adapter_allocates(line_run: tuple[str, InstrumentedRun]) -> None:
    _, run = line_run
    out = run.result.stdout
    assert f"EXAMPLE-ERROR {EXAMPLES / 'sequence_len_huge.py'} SequenceLenHugeError" in out
    assert "LoopingSequence" in out
    events = split(run)["sequence_len_huge.py"]
    assert not [e for e in events if isinstance(e, TrainingPlan)]  # fit never started
    # The looping fix trained 3 x 8 steps (plus the batches Keras peeks at for the input
    # signature and prefetching reads ahead: legacy tf.keras reads all 32) and told the wrapped
    # sequence once per 8 items served.
    served = re.search(r"trained 3 epochs; (\d+) batches served, (\d+) passes", out)
    assert served, out
    assert 24 <= int(served[1]) <= 2 * 24
    assert int(served[2]) == int(served[1]) // 8
