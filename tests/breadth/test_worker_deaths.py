"""A distributed job's dead worker named in the RUN findings, from the real output of Ray Train
2.60 (TorchTrainer, 2 CPU workers) and torchrun (torch 2.13) runs under `trainmedic run`.

The logs in data/ are the log lines those runs recorded (Ray's repetitive placement-group
messages left out): ray_worker_oom (rank 1 OOM-killed under `--memory-limit 3G`),
ray_worker_abort (rank 1 calls os.abort), ray_worker_raise (rank 1 raises ValueError),
ray_worker_memory_monitor (rank 1 killed by Ray's own memory monitor, no cgroup limit, with
RAY_memory_usage_threshold=0.35),
torchrun_worker_sigkill (rank 1 SIGKILLs itself), torchrun_worker_abort (rank 1 calls os.abort
in `load_shard` with faulthandler on). The opt-in test_ray.py reproduces the Ray
ones end to end; tests/cli/test_run.py the torchrun OOM kill.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainmedic.events import Epoch, Event, LogLine, MemoryLimit, MemorySample, OomKill, RunEnd, RunStart
from trainmedic.evidence.ray import is_ray_process
from trainmedic.findings import Finding
from trainmedic.record import RunRecord
from trainmedic.registry import run_rules
from trainmedic.rules._helpers import workers as _workers
from trainmedic.supervise.tree import classify

from ..conftest import trainmedic_cmd

DATA = Path(__file__).with_name("data")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "breadth"
GiB = 1 << 30


def record(log: str, *extra: Event, exit_code: int = 1) -> RunRecord:
    lines = (DATA / f"{log}.log").read_text().splitlines()
    events: list[Event] = [RunStart(t=0.0, command=["python", "train.py"])]
    events += [LogLine(t=1.0 + i * 0.001, stream="stderr", text=text) for i, text in enumerate(lines)]
    events += [*extra, RunEnd(t=100.0, exit_code=exit_code)]
    return RunRecord.of(events)


def by_code(rec: RunRecord) -> dict[str, Finding]:
    return {f.code: f for f in run_rules(rec) if f.code.startswith("RUN")}


def test_ray_worker_oom_kill_names_rank_pid_and_actor() -> None:
    rec = record(
        "ray_worker_oom",
        MemoryLimit(t=0.5, limit_bytes=3 * GiB, source="memory-limit-option"),
        MemorySample(t=50.0, rss_bytes=4 * GiB, processes={"22030": int(1.5 * GiB), "22087": GiB // 2}),
        Epoch(t=60.0, epoch=9, rank=1, metrics={"loss": 1.0}),
        OomKill(t=99.0, count=1, scope="cgroup"),
    )
    found = by_code(rec)
    assert "RUN009" not in found  # the driver's WorkerGroupError is the consequence, not the cause
    oom = found["RUN001"]
    worker = oom.evidence["worker"]
    assert isinstance(worker, dict)
    assert (worker["rank"], worker["pid"], worker["actor"]) == (1, 22030, "RayTrainWorker")
    assert worker["actor_id"] == "b352bb0cbcdc3f9f84d9780801000000"
    assert worker["peak_rss_bytes"] == int(1.5 * GiB)
    assert worker["last_epoch"] == 10
    assert oom.message.startswith(
        "Ray Train worker rank 1 (pid 22030, actor RayTrainWorker b352bb0c) was killed"
    )
    assert "(ray.train.WorkerGroupError)" in oom.message
    assert "Rank 1" in (oom.fix or "")


def test_without_a_cgroup_the_host_counter_and_a_silent_worker_death_are_an_oom_kill() -> None:
    found = by_code(record("ray_worker_oom", OomKill(t=99.0, count=1, scope="host")))
    assert found["RUN001"].evidence["oom_kill_scope"] == "host"
    assert found["RUN001"].evidence["worker"]["rank"] == 1  # type: ignore[index]


def test_ray_memory_monitor_kill_is_an_oom_kill_without_a_kernel_counter() -> None:
    found = by_code(record("ray_worker_memory_monitor"))  # no OomKill event: Ray killed it
    assert "RUN002" not in found  # ray.exceptions.OutOfMemoryError is the host's memory
    assert "RUN009" not in found
    oom = found["RUN001"]
    assert oom.evidence["oom_kill_scope"] == "ray-memory-monitor"
    worker = oom.evidence["worker"]
    assert isinstance(worker, dict)
    assert (worker["rank"], worker["pid"], worker["ray_worker_memory"]) == (1, 1228, "3.92GB")
    assert worker["ray_memory_monitor"] == "node memory 8.25GB used / 23.54GB limit, threshold 35.0%"
    assert oom.message.startswith(
        "Ray Train worker rank 1 (pid 1228, actor RayTrainWorker 8a1a8b27) was killed by Ray's memory monitor"
    )
    assert "RAY_memory_usage_threshold" in (oom.fix or "")


def test_ray_worker_native_crash_is_run008_with_its_own_stack() -> None:
    found = by_code(record("ray_worker_abort"))
    assert "RUN009" not in found
    assert "RUN001" not in found
    crash = found["RUN008"]
    worker = crash.evidence["worker"]
    assert isinstance(worker, dict)
    assert (worker["rank"], worker["pid"]) == (1, 20446)
    assert worker["error"] == "Fatal Python error: Aborted (SIGABRT)"
    assert worker["frame"] == "train_loop (ray_train_worker_crash.py:32)"
    assert crash.message.startswith("Native crash of Ray Train worker rank 1 (pid 20446")
    assert crash.file is not None
    assert crash.file.endswith("ray_train_worker_crash.py")


def test_ray_worker_exception_is_run009_with_the_workers_traceback() -> None:
    found = by_code(record("ray_worker_raise"))
    crash = found["RUN009"]
    worker = crash.evidence["worker"]
    assert isinstance(worker, dict)
    assert (worker["rank"], worker["pid"]) == (1, 25428)  # pid from Ray's list of the worker group
    assert worker["error"] == "ValueError: corrupt shard on rank 1: label 7 outside [0, 5)"
    assert worker["frame"] == "train_loop (ray_train_worker_crash.py:31)"
    assert crash.evidence["driver_exception"] == "ray.train.WorkerGroupError"
    assert "RUN008" not in found


def test_torchrun_worker_sigkill_is_named_and_told_apart_from_an_oom_kill() -> None:
    found = by_code(record("torchrun_worker_sigkill"))
    kill = found["RUN008"]
    assert kill.evidence["worker"] == {
        "launcher": "torchrun",
        "rank": 1,
        "pid": 24825,
        "actor": None,
        "actor_id": None,
        "error": None,
        "frame": None,
        "exit_code": -9,
        "ray_memory_monitor": None,
        "ray_worker_memory": None,
        "peak_rss_bytes": None,
        "last_epoch": None,
    }
    assert "not the OOM killer" in kill.message
    oom = by_code(record("torchrun_worker_sigkill", OomKill(t=99.0, count=1, scope="cgroup")))
    assert "RUN008" not in oom
    assert oom["RUN001"].message.startswith("torchrun worker rank 1 (pid 24825) was killed by the OOM killer")


def test_torchrun_worker_native_crash_gives_its_faulthandler_frame() -> None:
    found = by_code(record("torchrun_worker_abort"))
    assert "RUN009" not in found
    crash = found["RUN008"]
    worker = crash.evidence["worker"]
    assert isinstance(worker, dict)
    assert (worker["rank"], worker["exit_code"], worker["error"]) == (1, -6, "Fatal Python error: Aborted")
    assert worker["frame"] == "load_shard (abort1.py:7)"
    assert crash.message.startswith(f"Native crash of torchrun worker rank 1 (pid {worker['pid']})")


def test_an_ordinary_crash_names_no_worker() -> None:
    rec = RunRecord.of(
        [
            RunStart(t=0.0, command=["python", "train.py"]),
            *[
                LogLine(t=1.0, stream="stderr", text=t)
                for t in (
                    "Traceback (most recent call last):",
                    '  File "train.py", line 3, in <module>',
                    "ValueError: bad",
                )
            ],
            RunEnd(t=2.0, exit_code=1),
        ]
    )
    crash = by_code(rec)["RUN009"]
    assert "worker" not in crash.evidence
    assert crash.message.startswith("Crashed with ValueError: bad")


def test_coloured_and_plain_ray_prefixes_are_read_alike() -> None:
    lines = (DATA / "ray_worker_abort.log").read_text().splitlines()
    plain = [line.replace("\x1b[36m", "").replace("\x1b[0m", "").replace("\x1b[33m", "") for line in lines]
    assert _workers.dead_worker(lines, {}) == _workers.dead_worker(plain, {})


def test_ray_processes_are_workers_of_the_driver_not_trainers() -> None:
    from trainmedic.supervise.tree import Proc

    site = "/venv/lib/python3.11/site-packages/ray"
    cmdlines = {
        100: (1, ["/venv/bin/python", "train.py"]),
        101: (100, [f"{site}/core/src/ray/gcs/gcs_server", "--log_dir=/tmp/ray"]),
        102: (100, ["/venv/bin/python", "-u", f"{site}/autoscaler/_private/monitor.py"]),
        103: (100, [f"{site}/core/src/ray/raylet/raylet", "--raylet_socket_name=x"]),
        104: (103, ["/venv/bin/python", f"{site}/_private/workers/default_worker.py", "--node-ip-address=x"]),
        105: (103, ["ray::RayTrainWorker"]),
        106: (103, ["/venv/bin/python", "-u", f"{site}/dashboard/agent.py"]),
    }
    tree = {pid: Proc(pid, ppid, argv, 0.0, handle=None) for pid, (ppid, argv) in cmdlines.items()}  # type: ignore[arg-type]
    roles = classify(tree, 100, announced=[100, 102, 104, 105, 106])
    assert roles[100] == "trainer"
    assert {roles[pid] for pid in range(101, 107)} == {"worker"}
    assert not is_ray_process(["/venv/bin/python", "train_ray_model.py"])


@pytest.mark.slow
def test_real_torchrun_worker_oom_kill_is_named_with_its_rank(tmp_path: Path) -> None:
    """End to end: a real cgroup OOM kill of torchrun's rank 1 under `trainmedic run`."""
    torchrun = Path(sys.executable).with_name("torchrun")
    out = tmp_path / "run"
    command = ["--", str(torchrun), "--nproc-per-node", "2", str(EXAMPLES / "torchrun_worker_oom.py")]
    result = subprocess.run(
        [*trainmedic_cmd(), "run", "--quiet", "--memory-limit", "1G", "--out", str(out), *command],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
        env={**os.environ, "NO_COLOR": "1", "TRAINMEDIC_STATE_DIR": str(tmp_path / "state")},
    )
    assert result.returncode == 1, result.stderr[-3000:]
    found = {f["code"]: f for f in json.loads((out / "findings.json").read_text())["findings"]}
    oom = found["RUN001"]
    assert oom["evidence"]["oom_kill_scope"] == "cgroup"
    assert oom["evidence"]["worker"]["launcher"] == "torchrun"
    assert oom["evidence"]["worker"]["rank"] == 1
    assert oom["evidence"]["worker"]["exit_code"] == -9
    assert oom["message"].startswith(
        f"torchrun worker rank 1 (pid {oom['evidence']['worker']['pid']}) was killed"
    )
    assert "RUN008" not in found
    assert "RUN009" not in found


def test_rays_leftover_processes_are_not_reported_as_the_users_orphans() -> None:
    from trainmedic.events import OrphanEnded

    ray_cleaner = OrphanEnded(
        t=99.0, pid=25299, ppid=1, cmdline=["ray::PlacementGroupCleaner", ""], rss_bytes=1
    )
    loader = OrphanEnded(t=99.0, pid=300, ppid=1, cmdline=["python", "train.py"], rss_bytes=1)
    assert "RUN010" not in by_code(record("ray_worker_raise", ray_cleaner))
    assert (
        by_code(record("ray_worker_raise", ray_cleaner, loader))["RUN010"].evidence["processes"][0]["pid"]
        == 300
    )  # type: ignore[index]
