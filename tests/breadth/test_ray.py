"""Ray Train under the boot module: a real local Ray cluster with two CPU workers.

Opt-in (TRAINMEDIC_RAY_TESTS=1): starting Ray takes one to two minutes on a 2-core CI
machine, more than this suite's budget; and Ray is not in the `all` extra.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from trainmedic.events import Epoch

from ..helpers import run_instrumented

pytest.importorskip("ray.train")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("TRAINMEDIC_RAY_TESTS") != "1", reason="set TRAINMEDIC_RAY_TESTS=1"),
]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "breadth" / "ray_train_diverging.py"


def test_each_workers_reports_arrive_with_its_rank(tmp_path: Path) -> None:
    env = {"RAY_RESULTS": str(tmp_path / "ray_results"), "RAY_DEDUP_LOGS": "0"}
    run = run_instrumented([sys.executable, str(EXAMPLE)], tmp_path, timeout=420, env=env)
    assert run.result.returncode == 0, run.result.stderr[-3000:]
    epochs = run.record.of_type(Epoch)
    assert {e.rank for e in epochs} == {0, 1}
    for rank in (0, 1):
        losses = [e.metrics["loss"] for e in epochs if e.rank == rank]
        assert len(losses) == 8
        assert losses[-1] != losses[-1] or losses[-1] > 1e6  # lr 1.0 on inputs x10: NaN or huge
    workers = [p for p in run.record.processes if p.role == "worker"]
    assert {p.rank for p in workers} == {0, 1}
    assert len({p.pid for p in workers}) == 2  # two real worker processes, not the driver
    assert all(p.pid != run.record.processes[0].pid for p in workers)
