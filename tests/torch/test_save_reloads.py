"""The save checks' reloads in the training process (`trainmedic.torch._save_reload`): a plain
`torch.save` of a state dict loaded strictly into a new copy of the module it came from, and a
Lightning checkpoint rebuilt with the module's own `load_from_checkpoint`, each probed on rows
of the run's own batch against the module at the save (TOR015).

One child under the boot module (as `trainmedic run` runs a script) runs `run_save_reloads.py`:
a real DistributedDataParallel state dict (gloo, one process: keys under `module.`) and a real
torch.compile'd module's (eager backend: keys under `_orig_mod.`), each beside its inner
model's; a model's own state dict; Lightning modules without `save_hyperparameters()` (their
`__init__` needs `hidden`), with it, and with a non-persistent buffer learned in training.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trainmedic.events import GuardObservation
from trainmedic.findings import Finding
from trainmedic.record import RunRecord
from trainmedic.registry import run_rules
from trainmedic.rules.tor import tor015_saved_model_differs as tor015
from trainmedic.torch._save_reload import missing_arguments

from ..helpers import InstrumentedRun, run_instrumented
from .conftest import SINGLE_THREAD

pytest.importorskip("lightning")

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def child(tmp_path_factory: pytest.TempPathFactory) -> tuple[InstrumentedRun, Path]:
    tmp = tmp_path_factory.mktemp("reloads")
    out = tmp / "out"
    run = run_instrumented(["python", str(HERE / "run_save_reloads.py"), str(out)], tmp, env=SINGLE_THREAD)
    assert run.result.returncode == 0, run.result.stderr[-3000:]
    return run, out


@pytest.fixture(scope="module")
def by_path(child: tuple[InstrumentedRun, Path]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for event in child[0].record.events:
        if isinstance(event, GuardObservation) and event.check == tor015.RELOAD_OBSERVATION:
            found.setdefault(Path(event.data["path"]).name, []).append(event.data)
    return found


@pytest.fixture(scope="module")
def jobs(child: tuple[InstrumentedRun, Path]) -> dict[str, dict[str, Any]]:
    """Each save's job and result in the run folder's save-checks/, by the saved file's name."""
    scratch = child[0].events_path.parent / "save-checks"
    found = {}
    for job in scratch.glob("*/*/job.json"):
        spec = json.loads(job.read_text())
        found[Path(spec["path"]).name] = {
            **spec,
            "result": json.loads((job.parent / "result.json").read_text()),
        }
    return found


@pytest.fixture(scope="module")
def findings(child: tuple[InstrumentedRun, Path]) -> list[Finding]:
    return [f for f in run_rules(RunRecord.of(child[0].record.events)) if f.code == "TOR015"]


def test_a_ddp_state_dict_does_not_load_into_the_model_it_came_from(by_path) -> None:
    (data,) = by_path["ddp.pt"]
    assert (data["kind"], data["saved"]) == (tor015.RELOAD_FAILED, "state_dict")
    assert (data["strip"], data["add"], data["prefix_matches"]) == ("module.", "", 4)
    assert data["missing"] == data["unexpected"] == data["model_tensors"] == 4
    assert data["where"].startswith("run_save_reloads.py:")
    assert "Sequential.load_state_dict(strict=True)" in data["loader"]
    assert "the checkpoint's keys start with 'module.'" in tor015.reload_message(data)
    fix = tor015.reload_fix(data) or ""
    assert "consume_prefix_in_state_dict_if_present(state_dict, 'module.')" in fix
    assert "model.module.state_dict()" in fix


def test_a_compiled_models_state_dict_names_the_orig_mod_prefix(by_path) -> None:
    (data,) = by_path["compiled.pt"]
    assert (data["kind"], data["strip"], data["prefix_matches"]) == (tor015.RELOAD_FAILED, "_orig_mod.", 4)
    assert "model._orig_mod.state_dict()" in (tor015.reload_fix(data) or "")


def test_a_lightning_module_without_its_hyperparameters_does_not_rebuild(by_path) -> None:
    (data,) = by_path["unrecorded.ckpt"]
    assert (data["kind"], data["saved"]) == (tor015.RELOAD_FAILED, "lightning")
    assert data["missing_arguments"] == ["hidden"]
    assert data["loader"] == "Unrecorded.load_from_checkpoint(path)"
    assert "missing 1 required positional argument: 'hidden'" in data["error"]
    fix = tor015.reload_fix(data) or ""
    assert "self.save_hyperparameters() in Unrecorded.__init__" in fix
    assert "Unrecorded.load_from_checkpoint(path, hidden=...)" in fix


def test_a_non_persistent_buffer_learned_in_training_reloads_at_its_initial_value(by_path) -> None:
    (data,) = by_path["standardized.ckpt"]
    assert (data["kind"], data["saved"], data["dtype"]) == (tor015.OUTPUTS_DIFFER, "lightning", "float32")
    assert data["max_abs_diff"] > tor015.OUTPUT_TOLERANCE["float32"] * data["output_scale"]
    assert data["probe"].startswith("the first 4 rows of the run's batch at step ")
    message = tor015.reload_message(data)
    assert "reloaded with Standardized.load_from_checkpoint(path)" in message
    assert "answers a probe (the first 4 rows of the run's batch" in message


def test_healthy_saves_reload_equal_on_the_runs_rows(by_path, jobs) -> None:
    # each reloaded and probed (its job's measures), none observed
    for quiet in ("mlp.pt", "ddp-module.pt", "compiled-orig.pt", "recorded.ckpt"):
        assert quiet not in by_path, by_path.get(quiet)
        job = jobs[quiet]
        assert job["probe"].startswith("the first 4 rows of the run's batch at step "), job
        assert job["result"]["max_abs_diff"] <= 1e-6 * max(1.0, job["result"]["output_scale"])
    assert jobs["recorded.ckpt"]["result"]["state"]["differ"] == 0  # the fingerprints, as without a forward


def test_only_the_failures_are_observed_and_worded(by_path, findings) -> None:
    assert sorted(by_path) == ["compiled.pt", "ddp.pt", "standardized.ckpt", "unrecorded.ckpt"]
    (finding,) = findings  # the code's finding words its first observation: the DDP save's
    assert "does not reload with torch.load(path, weights_only=True)" in finding.message
    assert "ddp.pt" in finding.message


def test_missing_arguments_read_from_the_type_error() -> None:
    assert missing_arguments(TypeError("M.__init__() missing 1 required positional argument: 'hidden'")) == [
        "hidden"
    ]
    two = TypeError("M.__init__() missing 2 required keyword-only arguments: 'a' and 'b'")
    assert missing_arguments(two) == ["a", "b"]
    assert missing_arguments(ValueError("missing 1 required positional argument: 'x'")) == []
