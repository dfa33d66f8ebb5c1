"""The supervisor after the trainer's exit (benchmarks/supervisor_soak.py, kept short): the
diagnosis and the report of a long fast run end, within the report's budget, and the
supervisor's own costs are recorded in the run folder.

A minute of a fast loop's events (318,000 steps at 5,300 a second, a constant learning rate)
is the shortest fed run whose bucketed learning rate once gave the report a range below the
float resolution of its values: the report's tick loop then never ended, and the supervisor
grew until the OOM killer ended it (4 GiB in 2 minutes, measured with that benchmark).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from benchmarks.supervisor_soak import make_run_folder

from trainmedic.report.bounded import write_report_within
from trainmedic.verdict import LiveDiagnosis

from ..conftest import trainmedic_cmd

pytestmark = pytest.mark.slow


def test_a_minute_of_a_fast_loop_is_diagnosed_and_reported(tmp_path: Path) -> None:
    make_run_folder(tmp_path, 60.0)
    live = LiveDiagnosis(tmp_path, render=write_report_within)
    live.conclude()
    assert live.report["status"] == "written", live.report
    page = (tmp_path / "report.html").read_text()
    assert 'data-chart="metric-step-lr"' in page  # the constant learning rate, drawn
    # the trainer's counts, not the events': 318,000 steps in 2,490 bucketed events, 5,300 a second
    assert "<b>318,000</b><span>steps</span>" in page
    assert "<b>5300</b><span>steps / s</span>" in page
    assert json.loads((tmp_path / "findings.json").read_text()) == {"findings": []}


LOOP = textwrap.dedent(
    """
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(32, 8), torch.randn(32, 1)
    for step in range(3000):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
    print("done", flush=True)
    """
)


def test_a_real_run_records_the_supervisors_own_costs(tmp_path: Path) -> None:
    script, run_dir = tmp_path / "loop.py", tmp_path / "run"
    script.write_text(LOOP)
    result = subprocess.run(
        [*trainmedic_cmd(), "run", "--quiet", "--out", str(run_dir), "--", sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    own = json.loads((run_dir / "manifest.json").read_text())["supervisor"]
    assert own["peak_rss_bytes"] > 1 << 20
    assert own["after_exit_seconds"] >= 0
    assert own["report"]["status"] == "written"
    assert own["report"]["peak_rss_bytes"] > 1 << 20
    assert (run_dir / "report.html").is_file()


def test_a_skipped_report_keeps_the_diagnosis_and_the_exit_status(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    code = "import math; print('loss', math.nan); raise SystemExit(3)"
    options = ["--quiet", "--report-memory", "1M", "--out", str(run_dir)]
    result = subprocess.run(
        [*trainmedic_cmd(), "run", *options, "--", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 3
    said = [line for line in result.stderr.splitlines() if "report.html skipped" in line]
    assert len(said) == 1
    assert said[0].startswith("trainmedic: report.html skipped: its memory passed its budget of 1 MiB")
    assert "trainmedic diagnosis (exit status 3)" in result.stderr
    assert (run_dir / "findings.json").is_file()
    assert not (run_dir / "report.html").exists()
    own = json.loads((run_dir / "manifest.json").read_text())["supervisor"]
    assert own["report"]["status"] == "skipped"
