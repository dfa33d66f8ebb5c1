"""The report drawn in its own process within a time and a memory budget (`report.bounded`), as
`trainmedic run` draws it: a failing or runaway report costs the report alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic.eventlog.writer import EventWriter
from trainmedic.events import RunEnd, RunStart, Step
from trainmedic.report.bounded import ReportBudget, ReportSkipped, write_report_within
from trainmedic.verdict import LiveDiagnosis


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    with EventWriter(tmp_path / "events.jsonl") as writer:
        writer.emit(RunStart(t=100.0, pid=1, command=["python", "train.py"]))
        for step in range(1, 40):
            writer.emit(Step(t=100.0 + step, pid=7, step=step, metrics={"loss": 1 / step, "lr": 1e-3}))
        writer.emit(RunEnd(t=140.0, pid=1, exit_code=0))
    return tmp_path


def test_the_report_is_drawn_in_a_child_and_its_costs_returned(run_dir: Path) -> None:
    drawn = write_report_within(run_dir)
    assert Path(str(drawn["path"])) == run_dir / "report.html"
    assert (run_dir / "report.html").read_text().startswith("<!DOCTYPE html>")
    peak = drawn["peak_rss_bytes"]
    assert isinstance(peak, int)
    assert 1 << 20 < peak < ReportBudget().memory_bytes
    assert isinstance(drawn["seconds"], float)


def test_a_report_past_its_memory_budget_is_ended_and_said(run_dir: Path) -> None:
    # No Python process fits in 1 MiB: the child is ended at its first look
    with pytest.raises(ReportSkipped, match=r"its memory passed its budget of 1 MiB \(\d+ MiB resident\)"):
        write_report_within(run_dir, ReportBudget(memory_bytes=1 << 20))
    assert not (run_dir / "report.html").exists()


def test_a_report_past_its_time_is_ended_and_said(run_dir: Path) -> None:
    # No Python process starts in a microsecond
    with pytest.raises(ReportSkipped, match=r"not done within its budget of 1e-06 s"):
        write_report_within(run_dir, ReportBudget(seconds=1e-6))


def test_a_report_that_fails_gives_its_error_in_one_line(run_dir: Path) -> None:
    (run_dir / "report.html").mkdir()  # the page cannot replace a folder
    with pytest.raises(ReportSkipped, match=r"^IsADirectoryError: .*report\.html"):
        write_report_within(run_dir)


def test_the_diagnosis_is_written_whatever_becomes_of_the_report(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def render(path: Path) -> object:
        return write_report_within(path, ReportBudget(memory_bytes=1 << 20))

    live = LiveDiagnosis(run_dir, render=render)
    live.conclude()
    assert (run_dir / "findings.json").is_file()
    assert live.report["status"] == "skipped"
    said = capsys.readouterr().err.splitlines()
    assert said == [f"trainmedic: report.html skipped: {live.report['reason']} (findings.json is complete)"]
