"""Real torchrun jobs (gloo, CPU): the guard follows the agent into every worker.

- one node, two ranks: a missing set_epoch is TOR005 on ranks 0 and 1;
- two "nodes" on localhost (c10d rendezvous), one instrumented torchrun each,
  writing into one events file, as two `trainmedic run` on two hosts would.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from trainmedic.eventlog.reader import read_events
from trainmedic.events import GuardObservation, ProcessSpawn, Step
from trainmedic.record import RunRecord
from trainmedic.registry import run_rules

from ..helpers import InstrumentedRun, run_instrumented, torch_exit_abort
from .conftest import EXAMPLES, SINGLE_THREAD

SCRIPT = str(EXAMPLES / "sampler_epoch_not_set.py")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tor005(record: RunRecord):
    found = [f for f in run_rules(record) if f.code == "TOR005"]
    assert len(found) == 1, run_rules(record)
    return found[0]


@pytest.mark.slow
def test_two_rank_job_reports_missing_set_epoch_with_ranks(tmp_path: Path) -> None:
    argv = [*TORCHRUN, "--standalone", "--nproc-per-node", "2", SCRIPT]
    run = run_instrumented(argv, tmp_path, env=SINGLE_THREAD, timeout=240)
    assert run.result.returncode == 0, run.result.stderr[-3000:]
    finding = tor005(run.record)
    assert finding.evidence["ranks"] == [0, 1]
    assert finding.evidence["num_replicas"] == 2
    assert "ranks 0, 1" in finding.message
    assert {s.rank for s in run.record.of_type(Step)} == {0, 1}
    configs = [o for o in run.record.of_type(GuardObservation) if o.check == "torch_guard"]
    assert sorted((o.rank, o.data["local_rank"], o.data["world_size"]) for o in configs) == [
        (0, 0, 2),
        (1, 1, 2),
    ]
    announced = {p.rank for p in run.record.of_type(ProcessSpawn) if p.source == "announce"}
    assert {0, 1} <= announced  # the workers announced themselves; the agent has no rank


def two_node_job(tmp_path: Path) -> list[InstrumentedRun]:
    """Both nodes of one job into an empty `events.jsonl`, on a fresh port and rendezvous id.

    A fresh port and id each time: a rerun joins no store or rendezvous of an earlier try.
    """
    (tmp_path / "events.jsonl").unlink(missing_ok=True)
    port = free_port()
    rdzv_id = f"tm-test-{uuid.uuid4().hex[:8]}"

    def node(index: int) -> InstrumentedRun:
        if index == 1:  # join once node 0 serves the rendezvous store, or node 1 gives up early
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
                time.sleep(0.2)
        argv = [
            *TORCHRUN,
            "--nnodes", "2", "--nproc-per-node", "1", "--node-rank", str(index),
            "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", rdzv_id,
            # both "hosts" are localhost: say which one serves the store instead of racing for the port
            "--rdzv-conf", f"is_host={index == 0}",
            SCRIPT,
        ]  # fmt: skip
        env = {**SINGLE_THREAD, "TRAINMEDIC_NODE": f"node{index}"}
        return run_instrumented(argv, tmp_path, env=env, timeout=240, shared_events=True)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(node, [0, 1]))


@pytest.mark.slow
def test_two_nodes_write_into_one_events_file(tmp_path: Path) -> None:
    results = two_node_job(tmp_path)
    # PyTorch's exit-time abort (helpers.TORCH_EXIT_ABORT) on either node: the whole job once
    # more, as a node rerun alone would wait for a partner that has already finished.
    if any(torch_exit_abort(run.result) for run in results):
        results = two_node_job(tmp_path)
    for run in results:
        assert run.result.returncode == 0, run.result.stderr[-3000:]
    record = RunRecord.of(read_events(tmp_path / "events.jsonl").events)
    finding = tor005(record)
    assert finding.evidence["ranks"] == [0, 1]
    # c10d rendezvous, not the node's index, decides which node holds rank 0
    steps = record.of_type(Step)
    rank_of_node = dict({(s.node, s.rank) for s in steps})
    assert sorted(rank_of_node) == ["node0", "node1"]
    assert sorted(rank_of_node.values()) == [0, 1]
    configs = [o for o in record.of_type(GuardObservation) if o.check == "torch_guard"]
    assert sorted((o.node, o.data["group_rank"], o.data["local_rank"]) for o in configs) == sorted(
        (node, rank, 0) for node, rank in rank_of_node.items()
    )
