"""Real run folders for the report tests, made by the real `trainmedic run`.

Each folder comes from the real supervisor running a real process
(tests/report/trainer.py): its memory sampled while it runs, its output
captured, its findings decided by the rules, and, for the OOM run, a real
cgroup memory limit that the kernel enforces with a real OOM kill. The
supervisor writes report.html itself at the end of every run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ..conftest import trainmedic_cmd

TRAINER = Path(__file__).with_name("trainer.py")
SAMPLE_INTERVAL_S = "0.05"
OOM_LIMIT_MIB = 200


def make_run(run_dir: Path, mode: str, *, oom: bool = False) -> Path:
    """Run the trainer in `mode` (under a 200 MiB limit when `oom`); return its report.html."""
    argv = [
        *trainmedic_cmd(),
        "run",
        "--out",
        str(run_dir),
        "--sample-interval",
        SAMPLE_INTERVAL_S,
        "--quiet",
    ]
    if oom:
        argv += ["--memory-limit", f"{OOM_LIMIT_MIB}M"]
    argv += ["--", sys.executable, str(TRAINER), mode]
    env = {**os.environ, "NO_COLOR": "1"}
    result = subprocess.run(
        argv, capture_output=True, text=True, timeout=180, env=env, stdin=subprocess.DEVNULL, check=False
    )
    expected = 137 if oom else 0  # `run` exits with the trainer's status
    assert result.returncode == expected, (result.returncode, result.stderr[-3000:])
    report = run_dir / "report.html"
    assert report.is_file(), f"trainmedic run left no report.html in {run_dir}"
    assert f"trainmedic: report {report}\n" in result.stderr
    return report
