"""The diagnosis written while the run goes on (`verdict.LiveDiagnosis`, drawing the report with
`report.html.write_report`; `trainmedic run` draws it the same way in a bounded child process,
tests/report/test_bounded.py), on a real events file."""

from __future__ import annotations

import json
from pathlib import Path

from trainmedic.eventlog.writer import EventWriter
from trainmedic.events import LogLine, Step
from trainmedic.report.html import write_report
from trainmedic.verdict import LiveDiagnosis


def codes(run_dir: Path) -> list[str]:
    return [f["code"] for f in json.loads((run_dir / "findings.json").read_text())["findings"]]


def test_findings_json_appears_with_the_first_error_and_only_then(tmp_path: Path) -> None:
    live = LiveDiagnosis(tmp_path, render=write_report)
    with EventWriter(tmp_path / "events.jsonl") as writer:
        for step in range(10):
            event = Step(step=step, epoch=0, metrics={"loss": 1.0 / (step + 1)}, pid=7)
            writer.emit(event)
            live.note(event)
        progress = LogLine(text="Epoch 1/3", pid=1)
        writer.emit(progress)
        live.note(progress)
        assert not live.refresh()  # healthy steps and progress lines: nothing to diagnose
        assert not (tmp_path / "findings.json").exists()

        nan = Step(step=10, epoch=0, metrics={"loss": float("nan")}, pid=7)
        writer.emit(nan)
        live.note(nan)
        assert live.refresh()
    assert "TRN001" in codes(tmp_path)
    assert (tmp_path / "report.html").is_file()
    assert not list(tmp_path.glob(".*.tmp"))  # replaced by rename, no temporary left behind


def test_an_unchanged_diagnosis_is_not_written_again(tmp_path: Path) -> None:
    live = LiveDiagnosis(tmp_path, render=write_report)
    with EventWriter(tmp_path / "events.jsonl") as writer:
        for step, loss in enumerate([1.0, 0.5, float("inf")]):
            event = Step(step=step, metrics={"loss": loss}, pid=7)
            writer.emit(event)
            live.note(event)
    assert live.refresh()
    live._next_allowed = 0.0  # as if the pause after a diagnosis had passed
    live.note(Step(step=3, metrics={"loss": float("inf")}, pid=7))
    assert not live.refresh()  # the same error-level findings: the files stay as they are
