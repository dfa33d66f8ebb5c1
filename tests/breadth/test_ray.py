"""Ray Train under `trainmedic run`: a real local Ray cluster with two CPU workers.

Opt-in (TRAINMEDIC_RAY_TESTS=1): starting Ray takes one to two minutes on a 2-core CI
machine, more than this suite's budget; and Ray is not in the `all` extra.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from trainmedic.events import Epoch, ProcessSpawn, read_events

from ..conftest import trainmedic_cmd
from ..helpers import run_instrumented

pytest.importorskip("ray.train")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(os.environ.get("TRAINMEDIC_RAY_TESTS") != "1", reason="set TRAINMEDIC_RAY_TESTS=1"),
]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "breadth"
EXAMPLE = EXAMPLES / "ray_train_diverging.py"


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
    workers = [p for p in run.record.processes if p.role == "worker" and p.source == "announce"]
    assert {p.rank for p in workers} == {0, 1}
    assert len({p.pid for p in workers}) == 2  # two real worker processes, not the driver
    assert all(p.pid != run.record.processes[0].pid for p in workers)


def run_tm(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict, Path]:
    out = tmp_path / "run"
    result = subprocess.run(
        [*trainmedic_cmd(), "run", "--quiet", "--out", str(out), *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
        env={
            **os.environ,
            "NO_COLOR": "1",
            "TRAINMEDIC_STATE_DIR": str(tmp_path / "state"),
            "RAY_RESULTS": str(tmp_path / "ray_results"),
            **(env or {}),
        },
    )
    assert (out / "findings.json").exists(), result.stderr[-3000:]
    found = {f["code"]: f for f in json.loads((out / "findings.json").read_text())["findings"]}
    return result.returncode, found, out


def announced_rank_1(run_dir: Path) -> int:
    spawns = [e for e in read_events(run_dir / "events.jsonl").events if isinstance(e, ProcessSpawn)]
    return next(p.pid for p in spawns if p.source == "announce" and p.rank == 1)


def test_worker_oom_kill_is_named_with_its_ray_rank(tmp_path: Path) -> None:
    code, found, out = run_tm(
        tmp_path, "--memory-limit", "3G", "--", sys.executable, str(EXAMPLES / "ray_train_worker_oom.py")
    )
    assert code == 1  # the driver raises ray.train.WorkerGroupError
    oom = found["RUN001"]
    worker = oom["evidence"]["worker"]
    assert oom["evidence"]["oom_kill_scope"] == "cgroup"
    assert (worker["launcher"], worker["rank"], worker["actor"]) == ("Ray Train", 1, "RayTrainWorker")
    assert worker["pid"] == announced_rank_1(out)  # the pid Ray names is the worker that announced rank 1
    assert worker["peak_rss_bytes"] > 500 << 20  # rank 1 held its cache
    assert oom["message"].startswith(f"Ray Train worker rank 1 (pid {worker['pid']}, actor RayTrainWorker")
    assert "RUN009" not in found  # the driver's traceback is the consequence
    assert "RUN006" not in found  # Ray's own processes are the driver's workers, not trainers


@pytest.mark.parametrize("crash", ["abort", "raise"])
def test_worker_crash_is_named_with_its_ray_rank(tmp_path: Path, crash: str) -> None:
    code, found, out = run_tm(
        tmp_path, "--", sys.executable, str(EXAMPLES / "ray_train_worker_crash.py"), env={"CRASH": crash}
    )
    assert code == 1
    assert "RUN001" not in found
    assert "RUN006" not in found
    assert "RUN010" not in found  # Ray's leftovers (PlacementGroupCleaner) are not the user's orphans
    finding = found["RUN008" if crash == "abort" else "RUN009"]
    worker = finding["evidence"]["worker"]
    assert (worker["rank"], worker["pid"]) == (1, announced_rank_1(out))
    assert worker["frame"].startswith("train_loop (ray_train_worker_crash.py:")
    if crash == "abort":
        assert worker["error"].startswith("Fatal Python error: Aborted")
        assert "RUN009" not in found
    else:
        assert worker["error"].startswith("ValueError: corrupt shard on rank 1")
        assert finding["evidence"]["driver_exception"] == "ray.train.WorkerGroupError"


def test_worker_killed_by_rays_memory_monitor_is_named_with_its_ray_rank(tmp_path: Path) -> None:
    """No cgroup: Ray's own memory monitor kills rank 1 once the node passes a threshold set
    5 GB above what the machine uses now: Ray and its two torch workers take ~2 GB of that,
    rank 1's cache the rest (other jobs on the machine move the line a little)."""
    memory = psutil.virtual_memory()
    threshold = (memory.total - memory.available + (5 << 30)) / memory.total
    code, found, _ = run_tm(
        tmp_path,
        "--",
        sys.executable,
        str(EXAMPLES / "ray_train_worker_oom.py"),
        env={"RAY_memory_usage_threshold": f"{threshold:.3f}", "CACHE_LIMIT_MB": "9000"},
    )
    assert code == 1
    oom = found["RUN001"]
    assert oom["evidence"]["oom_kill_scope"] == "ray-memory-monitor"
    assert oom["evidence"]["worker"]["rank"] == 1
    assert oom["evidence"]["worker"]["ray_worker_memory"].endswith("GB")
    assert "RUN002" not in found
    assert "RUN009" not in found
    assert "RUN006" not in found  # the killed worker (a zombie for a moment) stays a worker
