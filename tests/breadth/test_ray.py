"""Ray Train under `trainmedic run`: a real local Ray cluster, `TorchTrainer` with two CPU workers.

A local cluster and its two torch workers take most of a minute to start on a 2-core
machine, so this module starts two, each prepared once and read by several tests:

- rank 1 reads a shard holding a NaN from epoch 3 (`NAN_RANK=1`), rank 0 trains normally:
  every worker's reports and optimizer steps arrive with its Ray rank, TRN001 names rank 1,
  and nothing else is reported (rank 0's curve is the healthy twin);
- rank 1 keeps every batch in memory until Ray's own memory monitor kills it: RUN001 names
  Ray's monitor as the killer and the worker's rank, pid and actor.

After each, no process of the run is left (Ray's GCS and raylet included). The worker-crash
variants (RUN008, RUN009) and the kernel's OOM kill under a cgroup limit read the same Ray
report and cost a cluster each: opt-in (TRAINMEDIC_RAY_TESTS=1).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from trainmedic.eventlog.reader import read_events
from trainmedic.events import Epoch, Event, ProcessSpawn, Step

from ..conftest import trainmedic_cmd

pytest.importorskip("ray.train")
pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(900)]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "breadth"
OPT_IN = pytest.mark.skipif(
    os.environ.get("TRAINMEDIC_RAY_TESTS") != "1",
    reason="a Ray cluster each; read as in the memory-monitor test: set TRAINMEDIC_RAY_TESTS=1",
)
# Ray's own settings for a quick, quiet local cluster: no usage-stats thread, every worker's
# line forwarded as printed (the driver's log is where trainmedic reads a dead worker's rank),
# and Train v2's controller polling its workers every 0.5 s instead of 2 s: a worker's
# `ray.train.report` waits for that poll, so each epoch here took 2 s, and so did noticing
# that the group had finished or lost a worker.
RAY_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_DEDUP_LOGS": "0",
    "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.5",
}


@dataclass(frozen=True)
class RayRun:
    code: int
    found: dict[str, dict]
    out: Path
    events: list[Event]
    left: list[str]  # command lines of the run's processes still alive after `trainmedic run` ended

    def announced(self) -> dict[int, int]:
        """rank -> pid of each Ray Train worker's announcement."""
        return {
            e.rank: e.pid
            for e in self.events
            if isinstance(e, ProcessSpawn) and e.source == "announce" and e.rank is not None
        }


def run_tm(tmp: Path, script: str, *args: str, env: dict[str, str] | None = None) -> RayRun:
    out = tmp / "run"
    result = subprocess.run(
        [
            *trainmedic_cmd(),
            "run",
            "--quiet",
            "--out",
            str(out),
            *args,
            "--",
            sys.executable,
            str(EXAMPLES / script),
        ],
        capture_output=True,
        text=True,
        timeout=800,
        cwd=tmp,
        stdin=subprocess.DEVNULL,
        check=False,
        env={
            **os.environ,
            **RAY_ENV,
            "NO_COLOR": "1",
            "TRAINMEDIC_STATE_DIR": str(tmp / "state"),
            "RAY_RESULTS": str(tmp / "ray_results"),
            **(env or {}),
        },
    )
    assert (out / "findings.json").exists(), result.stderr[-3000:]
    found = {f["code"]: f for f in json.loads((out / "findings.json").read_text())["findings"]}
    events = read_events(out / "events.jsonl").events
    return RayRun(result.returncode, found, out, events, left_behind(out / "events.jsonl"))


def left_behind(events_file: Path, wait_s: float = 30.0) -> list[str]:
    """The processes that were started for this run (they carry its events file in their
    environment) and are still alive `wait_s` after it ended: Ray's daemons would be these."""
    mine = str(events_file.resolve())
    deadline = time.monotonic() + wait_s
    while True:
        alive = []
        for p in psutil.process_iter():
            try:
                if p.environ().get("TRAINMEDIC_EVENTS") == mine and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(" ".join(p.cmdline())[:200])
            except (psutil.Error, OSError):
                continue
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(1)


# -- one worker's NaN, the other healthy --------------------------------------------------------
@pytest.fixture(scope="module")
def nan_run(tmp_path_factory: pytest.TempPathFactory) -> RayRun:
    return run_tm(
        tmp_path_factory.mktemp("ray_nan"), "ray_train_diverging.py", env={"LR": "0.001", "NAN_RANK": "1"}
    )


def test_each_workers_reports_and_steps_arrive_with_its_rank(nan_run: RayRun) -> None:
    assert nan_run.code == 0
    epochs = [e for e in nan_run.events if isinstance(e, Epoch)]
    assert sorted((e.rank, e.epoch) for e in epochs) == [(r, i) for r in (0, 1) for i in range(8)]
    announced = nan_run.announced()
    assert set(announced) == {0, 1}
    driver = next(e.pid for e in nan_run.events if isinstance(e, ProcessSpawn))
    assert len(set(announced.values())) == 2  # two real worker processes,
    assert driver not in announced.values()  # not the driver
    assert all(announced[e.rank] == e.pid for e in epochs)  # each report from its own worker
    # the guard's optimizer steps inside each worker carry the worker's Ray rank as well
    steps = [e for e in nan_run.events if isinstance(e, Step)]
    assert {(s.rank, s.pid) for s in steps} == {(r, pid) for r, pid in announced.items()}


def test_a_workers_nan_is_named_with_its_rank(nan_run: RayRun) -> None:
    nan = nan_run.found["TRN001"]
    assert nan["rank"] == 1
    assert (nan["evidence"]["ranks"], nan["evidence"]["epoch"], nan["evidence"]["value"]) == ([1], 4, "NaN")
    assert nan["message"].startswith("Loss `loss` became NaN at epoch 4 on rank 1")
    rank0 = [e.metrics["loss"] for e in nan_run.events if isinstance(e, Epoch) and e.rank == 0]
    assert all(math.isfinite(v) for v in rank0)
    assert rank0[-1] < rank0[0] / 4  # rank 0 learned
    assert set(nan_run.found) == {"TRN001"}  # the healthy rank and the cluster raise nothing


def test_no_process_of_the_nan_run_is_left(nan_run: RayRun) -> None:
    assert nan_run.left == []
    assert "RUN010" not in nan_run.found


# -- a worker killed by Ray's memory monitor ----------------------------------------------------
@pytest.fixture(scope="module")
def monitor_oom_run(tmp_path_factory: pytest.TempPathFactory) -> RayRun:
    """No cgroup limit: Ray's memory monitor kills a worker once the node passes a threshold set
    5 GB above what the machine uses now. Ray's processes take ~1 GB of that, rank 1's cache
    the rest (other jobs on the machine move the line a little). The cache grows 1 GB per
    epoch: the line is crossed in ~5 epochs, not ~40 of 100 MB, so the run's length depends
    little on how slowly a busy machine runs Ray's epochs (~2 s each at load 7)."""
    memory = psutil.virtual_memory()
    threshold = (memory.total - memory.available + (5 << 30)) / memory.total
    return run_tm(
        tmp_path_factory.mktemp("ray_oom"),
        "ray_train_worker_oom.py",
        env={
            "RAY_memory_usage_threshold": f"{threshold:.3f}",
            "CACHE_LIMIT_MB": "9000",
            "CACHE_STEP_MB": "1000",
        },
    )


def test_worker_killed_by_rays_memory_monitor_is_named_with_its_rank(monitor_oom_run: RayRun) -> None:
    run = monitor_oom_run
    assert run.code == 1  # the driver raises ray.train.WorkerGroupError
    oom = run.found["RUN001"]
    worker = oom["evidence"]["worker"]
    assert oom["evidence"]["oom_kill_scope"] == "ray-memory-monitor"
    # Ray 2.58 picks whom to kill by how recently their task started, not by their memory:
    # rank 1 (created last) in the runs seen here; the finding must name the one Ray killed
    assert (worker["launcher"], worker["actor"]) == ("Ray Train", "RayTrainWorker")
    assert worker["rank"] in (0, 1)
    assert (
        worker["pid"] == run.announced()[worker["rank"]]
    )  # Ray's pid is the worker that announced that rank
    assert worker["ray_worker_memory"].endswith("GB")
    assert oom["message"].startswith(f"Ray Train worker rank {worker['rank']} (pid {worker['pid']}")
    assert "was killed by Ray's memory monitor (node memory " in oom["message"]
    assert "RUN002" not in run.found  # not an external SIGKILL
    assert "RUN009" not in run.found  # the driver's traceback is the consequence
    # the killed workers (zombies for a moment) stay workers: no Ray process is a trainer
    assert "RUN006" not in run.found, run.found.get("RUN006", {}).get("evidence")


def test_no_process_of_the_killed_run_is_left(monitor_oom_run: RayRun) -> None:
    assert monitor_oom_run.left == []
    assert "RUN010" not in monitor_oom_run.found


# -- opt-in: the same reading of Ray's report, a cluster each -----------------------------------
@OPT_IN
def test_worker_oom_kill_under_a_cgroup_limit_is_named_with_its_ray_rank(tmp_path: Path) -> None:
    run = run_tm(tmp_path, "ray_train_worker_oom.py", "--memory-limit", "3G")
    assert run.code == 1
    oom = run.found["RUN001"]
    worker = oom["evidence"]["worker"]
    assert oom["evidence"]["oom_kill_scope"] == "cgroup"
    assert (worker["launcher"], worker["rank"], worker["actor"]) == ("Ray Train", 1, "RayTrainWorker")
    assert worker["pid"] == run.announced()[1]
    assert worker["peak_rss_bytes"] > 500 << 20  # rank 1 held its cache
    assert oom["message"].startswith(f"Ray Train worker rank 1 (pid {worker['pid']}, actor RayTrainWorker")
    assert "RUN009" not in run.found
    assert "RUN006" not in run.found  # Ray's own processes are the driver's workers, not trainers


@OPT_IN
@pytest.mark.parametrize("crash", ["abort", "raise"])
def test_worker_crash_is_named_with_its_ray_rank(tmp_path: Path, crash: str) -> None:
    run = run_tm(tmp_path, "ray_train_worker_crash.py", env={"CRASH": crash})
    assert run.code == 1
    assert "RUN001" not in run.found
    assert "RUN006" not in run.found
    assert "RUN010" not in run.found  # Ray's leftovers (PlacementGroupCleaner) are not the user's orphans
    finding = run.found["RUN008" if crash == "abort" else "RUN009"]
    worker = finding["evidence"]["worker"]
    assert (worker["rank"], worker["pid"]) == (1, run.announced()[1])
    assert worker["frame"].startswith("train_loop (ray_train_worker_crash.py:")
    if crash == "abort":
        assert worker["error"].startswith("Fatal Python error: Aborted")
        assert "RUN009" not in run.found
    else:
        assert worker["error"].startswith("ValueError: corrupt shard on rank 1")
        assert finding["evidence"]["driver_exception"] == "ray.train.WorkerGroupError"


def test_a_process_outside_a_train_worker_gets_no_ray_rank() -> None:
    """Train v1's context answers rank 0 (with a warning) outside a worker: the driver must
    not take that for its rank, nor have Ray's warning printed into the user's output."""
    code = (
        "import warnings, ray.train\n"
        "from trainmedic import ray as tm_ray\n"
        "from trainmedic.instrument import channel\n"
        "tm_ray.install(ray.train)\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    rank = channel.current_rank()\n"
        "print(rank, len(caught), ray.train.get_context().get_world_rank())\n"
    )
    env = {**os.environ, **RAY_ENV, "RAY_TRAIN_V2_ENABLED": "0"}
    env.pop("RANK", None)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    # no rank, no warning from the reader; asked directly, v1's context says 0
    assert result.stdout.split() == ["None", "0", "0"]
