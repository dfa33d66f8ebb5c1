"""A real FSDP2 job (torchrun, two ranks, gloo on the CPU) under the boot module: state dicts of
DTensor shards saved on rank 0 without gathering, found at the save with the rank (TOR016 for
the adapter's, TOR015 for the model's), and the same two gathered with
`get_model_state_dict(..., full_state_dict=True)`, quiet. The guard reads FSDP2's parameters
(sharded DTensors, and unsharded ones whose storage FSDP freed) without crashing the job.

FSDP1 (`FullyShardedDataParallel`) is not run: it refuses a machine without an accelerator
("FSDP needs a non-CPU accelerator device"); the size-0 tensors it writes are tested on a
SYNTHETIC file (tests/llm/test_saves.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from trainmedic.events import GuardObservation
from trainmedic.record import RunRecord
from trainmedic.registry import run_rules
from trainmedic.rules.tor import tor015_saved_model_differs as tor015
from trainmedic.rules.tor import tor016_adapter_saved_empty as tor016

from ..helpers import InstrumentedRun, run_instrumented

pytest.importorskip("peft")

HERE = Path(__file__).resolve().parent
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory, tinylm_dir: Path) -> InstrumentedRun:
    tmp = tmp_path_factory.mktemp("fsdp")
    run = run_instrumented(
        [*TORCHRUN, str(HERE / "run_fsdp_saves.py"), str(tinylm_dir), str(tmp / "out")],
        tmp,
        env={"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"},
        timeout=400,
    )
    assert run.result.returncode == 0, run.result.stderr[-3000:]
    return run


def saves(run: InstrumentedRun) -> dict[str, GuardObservation]:
    checks = {tor015.RELOAD_OBSERVATION, tor016.OBSERVATION}
    found = [e for e in run.record.events if isinstance(e, GuardObservation) and e.check in checks]
    return {Path(o.data["path"]).name: o for o in found}


@pytest.mark.slow
def test_shards_saved_without_gathering_are_found_on_their_rank(job: InstrumentedRun) -> None:
    found = saves(job)
    assert sorted(found) == ["adapter-sharded.pt", "model-sharded.pt"]  # the gathered two: quiet
    adapter = found["adapter-sharded.pt"]
    assert (adapter.check, adapter.rank, adapter.data["reason"]) == (tor016.OBSERVATION, 0, tor016.SHARDED)
    assert adapter.data["sharded"] == adapter.data["total"] == 8  # 4 LoRA layers, A and B
    name = "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"
    assert adapter.data["shapes"][name] == [[32, 4], [64, 4]]  # rank 0's half of the rows
    model = found["model-sharded.pt"]
    assert (model.check, model.rank, model.data["kind"]) == (tor015.RELOAD_OBSERVATION, 0, tor015.SHARDED)
    assert model.data["sharded"] == model.data["total"]

    findings = {f.code: f for f in run_rules(RunRecord.of(job.record.events))}
    assert findings["TOR016"].rank == 0
    assert "not the whole parameters" in findings["TOR016"].message
    assert "full_state_dict=True" in (findings["TOR016"].fix or "")
    assert findings["TOR015"].rank == 0
    assert "StateDictOptions" in (findings["TOR015"].fix or "")


@pytest.mark.slow
def test_the_guard_reads_fsdp2_parameters_on_every_rank(job: InstrumentedRun) -> None:
    # Both ranks trained and saved under the guard (a norm of a parameter FSDP2 freed crashed them).
    assert job.result.stdout.count("saved") == 2
    failed = [e for e in job.record.events if isinstance(e, GuardObservation) and "fail" in e.check]
    assert failed == []
