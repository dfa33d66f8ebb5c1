"""When the save checks run (`trainmedic.torch._save_hold`, `_saves.finish`, `_save_worker.launch`):
never in the training steps that follow a save. One real run under the explicit guard: tinylm
saved with `save_pretrained`, trained by large SGD steps, saved again to the same folder, then
saved to a second folder whose copy does not fit the held share (it is probed at once, and its
worker starts while training goes on); asserted by several tests. No timing is asserted: what
is held, what was written when, and the scheduling class of the worker."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest

import torch
import trainmedic.torch as tm
from tests.conftest import load_tinylm
from trainmedic.torch import _save_copy, _save_hold, _save_worker, _saves

pytestmark = pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux's SCHED_IDLE")


def _drained() -> None:
    """Every probe handed to the probes' thread so far has run (one thread, in order)."""
    go = threading.Event()
    go.set()
    _save_copy.start(None, lambda _: None, go).wait(timeout=120)


def _step(model: Any, ids: torch.Tensor) -> None:
    model(input_ids=ids, labels=ids).loss.backward()
    with torch.no_grad():  # a large SGD step by hand: every weight moves, the outputs with them
        for p in model.parameters():
            if p.grad is not None:
                p.sub_(10.0 * p.grad)
                p.grad = None


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from transformers import AutoModelForCausalLM

    out = tmp_path_factory.mktemp("deferral")
    model = AutoModelForCausalLM.from_pretrained(load_tinylm().cached())
    ids = torch.randint(3, 200, (2, 16), generator=torch.Generator().manual_seed(0))
    seen: dict[str, Any] = {}
    kept = _saves._drop_temp_scratch
    _saves._drop_temp_scratch = lambda: None  # the scratch kept to be read here
    try:
        with tm.guard() as guard:
            model.save_pretrained(out / "model")
            _step(model, ids)
            _drained()
            (first,) = _saves._state.jobs
            seen["first"] = first
            seen["written while training"] = (first.scratch / "job.json").exists()
            model.save_pretrained(out / "rotated")
            shutil.rmtree(out / "rotated")  # as a Trainer's save_total_limit removes a checkpoint
            seen["held"] = [Path(p).name for p in _saves._state.deferred.by_path]
            model.save_pretrained(out / "model")  # the same folder, within MIN_INTERVAL
            _step(model, ids)
            seen["jobs"] = list(_saves._state.jobs)
            share, _save_hold.SHARE = _save_hold.SHARE, 0.0  # the next copy does not fit
            try:
                model.save_pretrained(out / "other")
            finally:
                _save_hold.SHARE = share
            _drained()
            worker = _saves._state.worker
            assert worker is not None
            seen["class while training"] = os.sched_getscheduler(worker.pid)
            _step(model, ids)
            seen["lifted"] = _save_worker.lift(worker.pid)
            seen["class lifted"] = os.sched_getscheduler(worker.pid) if worker.poll() is None else None
            seen["end jobs"] = list(_saves._state.jobs)
    finally:
        _saves._drop_temp_scratch = kept
    seen["findings"] = guard.findings()
    seen["results"] = {
        Path(job.path).name: json.loads((job.scratch / "result.json").read_text()) for job in seen["end jobs"]
    }
    seen["out"] = sorted(p.name for p in out.iterdir())
    _saves._drop_temp_scratch()
    return seen


def test_a_saved_models_copy_is_held_not_probed_while_training(run: dict[str, Any]) -> None:
    assert run["held"] == ["model", "rotated"]
    assert run["written while training"] is False  # no probe ran in the steps after the save


def test_a_folder_saved_again_replaces_its_held_copy_and_a_removed_one_is_dropped(
    run: dict[str, Any],
) -> None:
    # The first save's file is overwritten: its copy is dropped unchecked, the second one is held;
    # the removed folder's copy goes at that save too (its memory freed before the end).
    (second,) = run["jobs"]
    assert second.path == run["first"].path
    assert second.scratch != run["first"].scratch
    assert not run["first"].scratch.exists()


def test_the_held_copy_is_probed_and_reloaded_at_the_end_and_matches(run: dict[str, Any]) -> None:
    # Compared with the first copy, the reload of the overwritten folder would differ by the SGD
    # steps taken between the saves (TOR015); the second copy is what the folder holds.
    result = run["results"]["model"]
    assert result["max_abs_diff"] <= 1e-4 * result["output_scale"]
    assert run["results"]["other"]["max_abs_diff"] <= 1e-4 * run["results"]["other"]["output_scale"]
    assert [f.message for f in run["findings"] if f.code in ("TOR015", "TOR016")] == []
    assert run["out"] == ["model", "other"]  # nothing of trainmedic's in the user's output folder


def test_a_worker_started_while_training_runs_in_the_idle_class_and_is_lifted_at_the_end(
    run: dict[str, Any],
) -> None:
    assert run["class while training"] == os.SCHED_IDLE
    if run["lifted"]:
        assert run["class lifted"] in (None, os.SCHED_OTHER)  # None: it had exited
    else:  # an unprivileged user with RLIMIT_NICE 0: `finish` replaces the worker instead
        assert os.geteuid() != 0
