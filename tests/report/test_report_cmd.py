"""`trainmedic report RUN_DIR`: the real command on real run folders; bad input exits 2, leaves nothing."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import pytest

from trainmedic.runfolder import clean_lines, lines_around_failure

from ..conftest import run_cli
from .test_formats import validate_sarif

pytestmark = pytest.mark.slow


@pytest.fixture
def oom_run(real_runs: dict[str, Path], tmp_path: Path) -> Path:
    copy = tmp_path / "oom-run"
    shutil.copytree(real_runs["oom"], copy)
    (copy / "report.html").unlink()
    return copy


def test_report_writes_the_page_and_prints_its_path(oom_run: Path) -> None:
    result = run_cli("report", str(oom_run))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{oom_run / 'report.html'}\n"
    assert result.stderr == ""
    page = (oom_run / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert 'data-code="RUN001"' in page
    assert [p.name for p in oom_run.iterdir() if p.name.startswith(".report-")] == []


def test_report_to_another_file(oom_run: Path, tmp_path: Path) -> None:
    target = tmp_path / "shared" / "page.html"
    result = run_cli("report", str(oom_run), "--output", str(target))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{target}\n"
    assert target.read_text().startswith("<!DOCTYPE html>")
    assert not (oom_run / "report.html").exists()


def test_report_formats_print_the_findings(oom_run: Path) -> None:
    github = run_cli("report", str(oom_run), "--format", "github")
    assert github.returncode == 0, github.stderr
    assert github.stdout.startswith("::error title=RUN001 oom-killed::Killed by the OOM killer at ")
    assert github.stderr == f"report: {oom_run / 'report.html'}\n"
    sarif = run_cli("report", str(oom_run), "--format", "sarif")
    log = json.loads(sarif.stdout)
    validate_sarif(log)
    recorded = [f["code"] for f in json.loads((oom_run / "findings.json").read_text())["findings"]]
    assert recorded[0] == "RUN001"
    assert [r["ruleId"] for r in log["runs"][0]["results"]] == recorded
    doc = json.loads(run_cli("report", str(oom_run), "--format", "json").stdout)
    assert doc["report"] == str(oom_run / "report.html")
    assert [f["code"] for f in doc["findings"]] == recorded


def test_open_hands_the_page_to_the_browser(
    oom_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = tmp_path / "opened.txt"
    fake_browser = tmp_path / "browser.sh"
    fake_browser.write_text(f'#!/bin/sh\necho "$1" > {seen}\n')
    fake_browser.chmod(fake_browser.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("BROWSER", str(fake_browser))  # webbrowser tries $BROWSER first
    result = run_cli("report", str(oom_run), "--open")
    assert result.returncode == 0, result.stderr
    assert seen.read_text().strip() == (oom_run / "report.html").resolve().as_uri()


def test_a_killed_supervisor_leaves_a_readable_folder(oom_run: Path) -> None:
    """Cut last event line, no findings.json, no manifest, no log: the page still renders."""
    events = oom_run / "events.jsonl"
    data = events.read_bytes()
    events.write_bytes(data[: len(data) - 30])
    for name in ("findings.json", "manifest.json", "output.log"):
        (oom_run / name).unlink()
    result = run_cli("report", str(oom_run))
    assert result.returncode == 0, result.stderr
    page = (oom_run / "report.html").read_text()
    assert "No manifest.json in this run folder." in page
    assert 'data-chart="memory"' in page


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "not a directory; expected a run folder holding events.jsonl"),
        ("no-events", "no events.jsonl here; expected a run folder written by `trainmedic run`"),
        ("bad-findings", "findings.json: not readable as JSON"),
        ("wrong-findings", 'findings.json: expected {"findings": [...]}'),
        ("bad-finding", "findings.json: a finding is malformed"),
        ("bad-manifest", "manifest.json: expected a JSON object"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_keeps_the_old_report(
    oom_run: Path, tmp_path: Path, setup: str, message: str
) -> None:
    run_dir = oom_run
    (oom_run / "report.html").write_text("previous report")
    if setup == "missing":
        run_dir = tmp_path / "nope"
    elif setup == "no-events":
        (oom_run / "events.jsonl").unlink()
    elif setup == "bad-findings":
        (oom_run / "findings.json").write_text("{not json")
    elif setup == "wrong-findings":
        (oom_run / "findings.json").write_text('[{"code": "RUN001"}]')
    elif setup == "bad-finding":
        (oom_run / "findings.json").write_text('{"findings": [{"code": "RUN001", "severity": "fatal"}]}')
    elif setup == "bad-manifest":
        (oom_run / "manifest.json").write_text("[1, 2]")
    result = run_cli("report", str(run_dir))
    assert result.returncode == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("trainmedic: error: ")
    assert message in line
    assert "Traceback" not in result.stderr
    assert (oom_run / "report.html").read_text() == "previous report"
    assert [p.name for p in oom_run.iterdir() if p.name.startswith(".report-")] == []


def test_log_lines_are_cleaned_like_a_terminal_shows_them() -> None:
    raw = ["\x1b[31mred\x1b[0m", "10/100 [==>...]\r100/100 [======]", "plain"]
    assert clean_lines(raw) == ["red", "100/100 [======]", "plain"]


def test_log_tail_keeps_where_a_long_traceback_began() -> None:
    lines = [f"step {i}" for i in range(500)] + ["Traceback (most recent call last):"]
    lines += [f'  File "x.py", line {i}' for i in range(200)] + ["RuntimeError: boom"]
    shown = lines_around_failure(lines, count=60)
    assert shown[3] == "Traceback (most recent call last):"
    assert shown[-1] == "RuntimeError: boom"
    assert any(s.startswith("... (") for s in shown)
    assert len(shown) <= 60 + 60 // 3 + 4
    short = [f"line {i}" for i in range(10)]
    assert lines_around_failure(short, count=60) == short
