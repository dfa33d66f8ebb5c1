"""TOR017 for real resumes: PyTorch's general checkpoint, Lightning's, the HF Trainer's folder.

One child under the boot module (as `trainmedic run` runs a script) runs every case of
`run_resumes.py`; each lost-state resume has its full-resume twin, which must stay quiet:
- the recipe's checkpoint loaded into the model only (examples/torch/resume_state_lost.py)
  against the same with the optimizer's and the scheduler's states loaded (`--fixed`);
- a Lightning checkpoint: `load_from_checkpoint` then `fit` against `fit(ckpt_path=...)`; the
  checkpoint itself, read back by the save checks: every tensor equal to the module's at the save;
- the HF Trainer's `checkpoint-2` folder: `from_pretrained` then `train()` against
  `train(resume_from_checkpoint=...)`;
- the recipe's checkpoint with the optimizer's state loaded and the scheduler's not;
- fp16 autocast under a GradScaler: the model and optimizer loaded, the scaler's state not,
  against all three loaded;
- a checkpoint with Adam's state loaded into a larger model under a new optimizer (a
  fine-tune, not a resume): quiet;
- the recipe's --mid-epoch checkpoint (step 40 of 16-batch epochs, with torch's, NumPy's and
  Python's generator states): resumed without restoring the generators and from the epoch's
  first batch, against the generators restored and the 8 trained batches skipped;
- Accelerate's `save_state`/`load_state` (one CPU process): a scheduler not passed to
  `prepare`, a mid-epoch resume without `skip_first_batches`, against both done.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

import torch
from trainmedic.findings import Finding, Severity
from trainmedic.registry import run_rules
from trainmedic.rules.tor import tor017_resume_state_lost as tor017
from trainmedic.torch._resumes import same_parameters
from trainmedic.torch._rng import kinds_in

from ..helpers import InstrumentedRun, records_by_case, run_instrumented
from .conftest import SINGLE_THREAD

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src" / "trainmedic"
CASES = [
    "example",
    "example:fixed",
    "scheduler-lost",
    "new-head",
    "amp:scaler-lost",
    "amp:scaler-loaded",
    "lightning:ckpt_path",
    "lightning:weights-only",
    "mid-epoch",
    "mid-epoch:fixed",
    "accelerate:full",
    "accelerate:scheduler-unregistered",
    "accelerate:no-skip",
    "hf:resume",
    "hf:from_pretrained",
]


@pytest.fixture(scope="module")
def child(tmp_path_factory: pytest.TempPathFactory) -> InstrumentedRun:
    tmp = tmp_path_factory.mktemp("resumes")
    return run_instrumented(
        ["python", str(HERE / "run_resumes.py"), *CASES], tmp, env=SINGLE_THREAD, timeout=400
    )


@pytest.fixture(scope="module")
def per_case(child: InstrumentedRun) -> dict[str, list[Finding]]:
    """The findings of each case, from the child's events cut at its markers."""
    assert child.result.returncode == 0, child.result.stderr[-3000:]
    assert f"trainmedic from {SRC}" in child.result.stdout, child.result.stdout
    return {case: run_rules(record) for case, record in records_by_case(child.record).items()}


def tor017_of(found: list[Finding]) -> Finding:
    (finding,) = [f for f in found if f.code == "TOR017"]
    return finding


def test_the_recipes_checkpoint_loaded_into_the_model_only_loses_moments_and_schedule(per_case) -> None:
    finding = tor017_of(per_case["example"])
    evidence = finding.evidence
    assert finding.severity is Severity.WARNING
    assert evidence["lost"] == [tor017.OPTIMIZER, tor017.SCHEDULER, tor017.STEP]
    assert (evidence["saved_moments"], evidence["resumed_moments"]) == (4, 0)
    # 3 epochs of 16 batches: Adam's step 48; the warm-up lr after 48 steps of decay, against
    # the first warm-up step's lr (1e-2 / 16) of the fresh schedule.
    assert (evidence["saved_step"], evidence["resumed_step"]) == (48, 0)
    assert evidence["resumed_lr"] == pytest.approx(1e-2 / 16)
    assert evidence["saved_lr"] > 5 * evidence["resumed_lr"]
    assert evidence["saved_counters"] == {"epoch": 2}
    assert evidence["where"].startswith("resume_state_lost.py:")
    assert "not the optimizer's state, the learning-rate scheduler and the step counter" in finding.message
    assert "optimizer.load_state_dict" in finding.fix
    assert "scheduler.load_state_dict" in finding.fix


def test_a_scheduler_left_out_while_the_optimizer_is_loaded_is_named_alone(per_case) -> None:
    finding = tor017_of(per_case["scheduler-lost"])
    assert finding.evidence["lost"] == [tor017.SCHEDULER]
    assert (finding.evidence["saved_moments"], finding.evidence["resumed_moments"]) == (4, 4)


def test_a_gradscaler_left_out_of_the_resume_is_named_with_its_saved_scale(per_case) -> None:
    finding = tor017_of(per_case["amp:scaler-lost"])
    assert finding.evidence["lost"] == [tor017.SCALER]
    assert finding.evidence["saved_scale"] == 2.0**11  # 2**8, doubled every 2 of 6 finite steps
    assert "scaler.load_state_dict" in finding.fix


@pytest.mark.parametrize(
    "case",
    [
        "example:fixed",
        "new-head",
        "amp:scaler-loaded",
        "lightning:ckpt_path",
        "hf:resume",
        "mid-epoch:fixed",
        "accelerate:full",
    ],
)
def test_full_resumes_and_fine_tunes_are_quiet(per_case, case: str) -> None:
    assert "TOR017" not in {f.code for f in per_case[case]}
    assert [f for f in per_case[case] if f.severity.at_least(Severity.WARNING)] == []


def test_lightning_load_from_checkpoint_then_fit_loses_the_optimizer_and_step(per_case) -> None:
    finding = tor017_of(per_case["lightning:weights-only"])
    evidence = finding.evidence
    assert evidence["framework"] == "lightning"
    assert evidence["lost"] == [tor017.OPTIMIZER, tor017.STEP]
    assert (evidence["saved_step"], evidence["resumed_step"]) == (8, 0)  # 2 epochs of 4 batches
    assert evidence["saved_counters"]["global_step"] == 8
    assert "ckpt_path=" in finding.fix


def test_a_lightning_checkpoint_is_read_back_equal_to_the_module_at_the_save(child, per_case) -> None:
    # `Trainer.save_checkpoint` after 2 epochs (run_resumes.py's `_lightning`): the save checks
    # read the file's state_dict back in their worker and compare each tensor with the module's
    # at the save, by fingerprint; the run folder keeps the job and its result.
    scratch = child.events_path.parent / "save-checks"
    jobs = [p for p in scratch.glob("*/*/job.json") if json.loads(p.read_text())["kind"] == "lightning"]
    (job,) = jobs
    result = json.loads((job.parent / "result.json").read_text())
    assert result["state"]["compared"] == 4  # two Linear layers' weights and biases
    assert result["state"]["missing"] == result["state"]["unexpected"] == result["state"]["differ"] == 0
    assert (result["tensors"]["total"], result["tensors"]["nonfinite"]) == (4, 0)
    assert not [f for found in per_case.values() for f in found if f.code == "TOR015"]


def test_hf_from_pretrained_on_a_checkpoint_folder_restarts_the_schedule(per_case) -> None:
    finding = tor017_of(per_case["hf:from_pretrained"])
    evidence = finding.evidence
    assert evidence["framework"] == "transformers"
    assert Path(evidence["checkpoint"]).name == "checkpoint-2"
    # checkpoint-2 of 4 batches an epoch: epoch 0.5, saved within the epoch
    assert evidence["lost"] == [tor017.OPTIMIZER, tor017.SCHEDULER, tor017.STEP, tor017.RNG, tor017.DATA]
    assert (evidence["saved_step"], evidence["resumed_step"]) == (2, 0)
    assert evidence["resumed_lr"] == 0.0  # the warm-up starts again at 0
    assert evidence["saved_lr"] > 0
    assert "resume_from_checkpoint=" in finding.fix


def test_a_mid_epoch_resume_that_restores_no_generator_and_replays_the_epoch(per_case) -> None:
    finding = tor017_of(per_case["mid-epoch"])
    evidence = finding.evidence
    assert evidence["lost"] == [tor017.RNG, tor017.DATA]
    assert (evidence["saved_rng"], evidence["restored_rng"]) == (["torch", "numpy", "python"], [])
    # 40 steps of one batch each: 8 batches into the third epoch of 16
    assert (evidence["saved_position"], evidence["epoch_batches"]) == (8, 16)
    assert "saved 8 batches into an epoch of 16, resumed at the epoch's first batch" in finding.message
    assert "torch.set_rng_state" in finding.fix
    assert "numpy.random.set_state" in finding.fix
    assert "random.setstate" in finding.fix
    assert "itertools.islice(loader, 8, None)" in finding.fix


def test_accelerate_restores_no_scheduler_it_was_not_given(per_case) -> None:
    finding = tor017_of(per_case["accelerate:scheduler-unregistered"])
    evidence = finding.evidence
    assert evidence["framework"] == "accelerate"
    assert evidence["lost"] == [tor017.SCHEDULER]
    # the optimizer comes back at step 12 with the warmed-up lr; the fresh schedule is at step 0
    assert (evidence["saved_step"], evidence["resumed_step"], evidence["scheduler_step"]) == (12, 12, 0)
    assert evidence["saved_lr"] == pytest.approx(1e-2)
    assert evidence["resumed_lr"] == pytest.approx(1e-2 / 8)
    assert evidence["where"].startswith("run_resumes.py:")
    assert "through Accelerator.load_state" in finding.message
    assert "accelerator.prepare" in finding.fix
    assert "register_for_checkpointing" in finding.fix


def test_accelerate_load_state_within_an_epoch_without_skip_first_batches(per_case) -> None:
    finding = tor017_of(per_case["accelerate:no-skip"])
    evidence = finding.evidence
    assert evidence["lost"] == [tor017.DATA]
    # 12 steps of 8-batch epochs, through a loader that draws one batch ahead
    assert (evidence["saved_position"], evidence["epoch_batches"]) == (4, 8)
    assert "accelerator.skip_first_batches(train_dataloader, 4)" in finding.fix


# -- the pure parts ----------------------------------------------------------------------------


def test_judge_names_each_part_saved_and_not_loaded() -> None:
    saved = {tor017.OPTIMIZER: True, tor017.SCHEDULER: True, tor017.SCALER: False}
    loaded = {tor017.OPTIMIZER: True, tor017.SCHEDULER: False, tor017.SCALER: False}
    assert tor017.judge(saved=saved, loaded=loaded, same_parameters=True, saved_step=10, resumed_step=10) == [
        tor017.SCHEDULER
    ]
    everything = dict.fromkeys(saved, True)
    assert (
        tor017.judge(saved=saved, loaded=everything, same_parameters=True, saved_step=10, resumed_step=10)
        == []
    )
    assert (
        tor017.judge(saved=saved, loaded=loaded, same_parameters=False, saved_step=10, resumed_step=0) == []
    )


def test_judge_names_generators_and_data_position_after_the_step() -> None:
    saved = {tor017.OPTIMIZER: True, tor017.RNG: True, tor017.DATA: True}
    loaded = {tor017.OPTIMIZER: True, tor017.RNG: False, tor017.DATA: False}
    lost = tor017.judge(saved=saved, loaded=loaded, same_parameters=True, saved_step=40, resumed_step=0)
    assert lost == [tor017.STEP, tor017.RNG, tor017.DATA]
    assert (
        tor017.judge(
            saved=saved,
            loaded=dict.fromkeys(saved, True),
            same_parameters=True,
            saved_step=40,
            resumed_step=40,
        )
        == []
    )


def test_generator_states_are_recognised_under_the_recipes_names() -> None:
    cpu, py, npy = torch.get_rng_state(), random.getstate(), np.random.get_state()
    cuda = [torch.zeros(16, dtype=torch.uint8)]
    # HF's rng_state.pth, Accelerate's random_states_0.pkl, flat keys of hand-written recipes
    assert kinds_in({"rng_state": {"python": py, "numpy": npy, "cpu": cpu, "cuda": cuda}}) == [
        "torch",
        "cuda",
        "numpy",
        "python",
    ]
    accelerate = {"step": 3, "random_state": py, "numpy_random_seed": npy, "torch_manual_seed": cpu}
    assert kinds_in(accelerate) == ["torch", "numpy", "python"]
    assert kinds_in({"cpu_rng_state": cpu, "np_rng": np.random.get_state(legacy=False)}) == ["torch", "numpy"]
    # a model's weights, a uint8 buffer of another size, a CPU machine's empty CUDA list: none
    assert (
        kinds_in({"model": {"w": torch.zeros(3)}, "mask": torch.zeros(16, dtype=torch.uint8), "cuda_rng": []})
        == []
    )


def test_same_parameters_compares_counts_and_the_saved_moments_shapes() -> None:
    assert same_parameters([(4, 2), None], [(4, 2), (2,)])
    assert not same_parameters([(4, 2)], [(4, 2), (2,)])
    assert not same_parameters([(10, 16), (10,)], [(3, 16), (3,)])
