"""TOR017 `resume-state-lost`: a resume restored the weights but not the rest of the training state.

Collectors:
- the PyTorch guard (`trainmedic.torch._resumes`), under `trainmedic run` or `trainmedic.torch.guard()`.
  It notes each `torch.load` whose result holds an optimizer's state dict (a plain checkpoint
  `{"model_state_dict", "optimizer_state_dict", ...}`, a Lightning checkpoint's
  `optimizer_states`) and, when a model then loads its weights from that very result (the
  resume), what the file held: the optimizer's moments (`saved_moments`, tensors with state),
  its learning rate (`saved_lr`) and step (`saved_step`), a scheduler's and a scaler's state,
  the random generators' states (`saved_rng`: torch's, CUDA's, NumPy's, Python's), its
  counters (`epoch`, `global_step`...) and `loss`. At the first optimizer step after the
  resume it measures the optimizer that steps (`resumed_moments`, `resumed_lr`, `resumed_step`,
  its parameter count against the saved one's, `same_parameters`), which of
  `Optimizer.load_state_dict`, an LR scheduler's, `GradScaler.load_state_dict` and the
  generators' setters (`restored_rng`) ran since the resume, and, when that step trained on the
  first batch of a DataLoader epoch, where in its epoch the checkpoint was saved
  (`saved_position` of `epoch_batches`, from the saved optimizer step). Lightning's
  `Trainer.fit(ckpt_path=...)` and `LightningModule.load_from_checkpoint` load through
  `torch.load` and `load_state_dict`, so they are measured here too.
- the same, for Accelerate (`trainmedic.torch._accelerate`): `Accelerator.load_state(folder)`
  is the resume, and an LR scheduler that drives the restored optimizer without being restored
  (not passed to `prepare` nor registered, so `save_state` never saved it) is a lost schedule.
- the Hugging Face callback (`trainmedic.hf`), at `on_train_begin`: a model loaded with
  `from_pretrained` from a Trainer checkpoint folder of the run's own `output_dir`
  (`checkpoint-N/` with `trainer_state.json`, `optimizer.pt`, `scheduler.pt`, `rng_state.pth`)
  while the Trainer starts at global step 0: `Trainer.train()` without `resume_from_checkpoint`.
  A fractional saved epoch is a save within an epoch: the restarted Trainer replays it.

Each calls `judge` with what was saved and what was restored, and observes `resume_state_lost`
with the evidence and `lost` (the parts of the state that did not come back) when it fires.

Not measured: a resume whose weights come from a file without optimizer state (nothing says it
is a resume); the data position of a loop that accumulates gradients, draws its batches itself,
or whose optimizer keeps no step count (the saved position is the optimizer's step); the size of
the loss jump (the losses are given: a loss after a resume differs from the loss before it by
the noise of one batch, which no general threshold tells from a lost state).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmedic.events import Event
from trainmedic.findings import FindingSpec, Severity
from trainmedic.record import Rule
from trainmedic.rules._helpers.guard import observation_rule, observed

#: The guard's observation this finding words.
OBSERVATION = "resume_state_lost"

#: The parts of the training state a resume can lose, in the order they are named.
OPTIMIZER, SCHEDULER, SCALER, STEP, RNG, DATA = "optimizer", "scheduler", "scaler", "step", "rng", "data"

# The parts are judged lost by presence, not by size: a checkpoint that holds an optimizer's,
# scheduler's or scaler's state was saved to be resumed from, and a resume that does not load
# it restarts that part from its initial value (empty Adam moments, step 0 of the schedule,
# the scaler's initial 2**16). There is no tolerance to tune. The one condition is that the
# optimizer that steps is the one that was saved: the same number of parameters
# (`same_parameters`). A checkpoint loaded to start something new (fine-tuning a pre-trained
# backbone under a new head, a new stage with a new optimizer) changes the parameters handed
# to the optimizer, and is not a resume. For the Trainer, the same condition is the output
# folder: a run that starts from a checkpoint of its own `output_dir` is that run restarted; a
# new stage writes elsewhere.
#
# The random generators are lost by the same presence test: a checkpoint that holds their states
# was saved so that dropout, augmentation and shuffling go on with the interrupted run's
# numbers. The data position is lost when the checkpoint was saved within an epoch (its
# optimizer step is not a multiple of the epoch's batches) and the first step after the resume
# trains on an epoch's first batch: the batches between that start and the save are trained a
# second time. Again no tolerance: any remainder is a replay.


def _example() -> list[Event]:
    """The tutorial's checkpoint loaded for its weights only; a fresh optimizer and warm-up."""
    return observed(
        OBSERVATION,
        framework="torch",
        checkpoint="checkpoint.pt",
        where="resume.py:52",
        lost=[OPTIMIZER, SCHEDULER, STEP],
        saved_moments=4,
        resumed_moments=0,
        saved_lr=0.01,
        resumed_lr=0.001,
        saved_step=40,
        resumed_step=0,
        saved_counters={"epoch": 4},
        saved_loss=0.41,
    )


SPEC = FindingSpec(
    code="TOR017",
    slug="resume-state-lost",
    severity=Severity.WARNING,
    title="Resume lost training state",
    what=(
        "A resumed run restored the model's weights but not all of the training state that was "
        "saved beside them: the optimizer's moments, the learning-rate scheduler, the AMP "
        "scaler, the step counter or the random generators start again from their initial "
        "values, or a checkpoint saved within an epoch is resumed from the epoch's first batch. "
        "What the checkpoint held, what the resumed run has instead (learning rate, moments, "
        "step, generators, position in the epoch) and the loss at the save are given."
    ),
    why=(
        "A resume that loads only the weights is a different run: Adam starts with empty "
        "moments (its first steps are full-size sign steps), the scheduler restarts its warm-up "
        "or its decay at step 0 (the learning rate jumps back up), a fresh GradScaler starts at "
        "2**16 and skips steps while it finds its scale again, fresh random generators draw "
        "other dropout masks, augmentations and shuffles, and a loop that starts the "
        "interrupted epoch again trains its first batches twice. The loss jumps after the "
        "resume and the run does not match the one that was interrupted. trainmedic notes each "
        "checkpoint that holds an optimizer's state and whose weights a model loads (and each "
        "Accelerator.load_state), and at the first optimizer step after it compares what was "
        "saved with what the optimizer, the scheduler, the scaler and the generators hold and "
        "where in its epoch the step's batch is. It stays quiet on a full resume, and on a "
        "checkpoint loaded to train something new (other parameters, another output folder)."
    ),
    example=(
        "checkpoint = torch.load('checkpoint.pt'); "
        "model.load_state_dict(checkpoint['model_state_dict'])  # the optimizer and scheduler "
        "states in the file are never loaded"
    ),
    fix=(
        "Restore the whole state the checkpoint holds: optimizer.load_state_dict(...), "
        "scheduler.load_state_dict(...), scaler.load_state_dict(...), torch.set_rng_state(...) "
        "(and NumPy's and Python's), the step and epoch counters, and skip the batches of the "
        "interrupted epoch already trained; with the Hugging Face Trainer, "
        "Trainer.train(resume_from_checkpoint=True or the checkpoint folder); with Lightning, "
        "Trainer.fit(model, ckpt_path=...); with Accelerate, every stateful object passed to "
        "prepare or register_for_checkpointing, and accelerator.skip_first_batches(...) after "
        "load_state."
    ),
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def judge(
    *,
    saved: Mapping[str, bool],
    loaded: Mapping[str, bool],
    same_parameters: bool,
    saved_step: int | None,
    resumed_step: int | None,
) -> list[str]:
    """The parts of the state the resume lost (empty: a full resume, or not a resume at all).

    `saved[part]`: the checkpoint held that part's state; `loaded[part]`: it was loaded since.
    The step counter is lost when the resumed run's step is back below the saved one.
    """
    if not same_parameters:
        return []
    lost = [part for part in (OPTIMIZER, SCHEDULER, SCALER) if saved.get(part) and not loaded.get(part)]
    if saved_step and resumed_step is not None and resumed_step < saved_step:
        lost.append(STEP)
    lost.extend(part for part in (RNG, DATA) if saved.get(part) and not loaded.get(part))
    return lost


_PARTS = {
    OPTIMIZER: "the optimizer's state",
    SCHEDULER: "the learning-rate scheduler",
    SCALER: "the GradScaler",
    STEP: "the step counter",
    RNG: "the random generators' states",
    DATA: "the data position",
}


def _number(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def _details(evidence: Mapping[str, Any]) -> list[str]:
    """The measured differences, each as 'saved -> resumed'."""
    details = []
    lost = evidence.get("lost") or []
    if OPTIMIZER in lost and evidence.get("saved_moments") is not None:
        details.append(
            f"optimizer moments for {evidence['saved_moments']} tensors in the checkpoint, "
            f"{evidence.get('resumed_moments', 0)} at the first step after the resume"
        )
    saved_lr, resumed_lr = evidence.get("saved_lr"), evidence.get("resumed_lr")
    if saved_lr is not None and resumed_lr is not None and saved_lr != resumed_lr:
        details.append(
            f"learning rate {_number(saved_lr)} at the save, {_number(resumed_lr)} after the resume"
        )
    if SCALER in lost and evidence.get("saved_scale") is not None:
        details.append(
            f"loss scale {_number(evidence['saved_scale'])} at the save, a fresh GradScaler's after"
        )
    if STEP in lost:
        details.append(f"step {evidence.get('saved_step')} at the save, {evidence.get('resumed_step')} after")
    if SCHEDULER in lost and evidence.get("scheduler_step") is not None:
        details.append(
            f"the optimizer restored at step {evidence.get('saved_step')}, its scheduler at step "
            f"{evidence['scheduler_step']}: save_state saved no scheduler"
        )
    if RNG in lost:
        restored = ", ".join(evidence.get("restored_rng") or []) or "none"
        details.append(
            f"random states saved for {', '.join(evidence.get('saved_rng') or [])}, restored: {restored}"
        )
    if DATA in lost and evidence.get("saved_position") is not None:
        details.append(
            f"saved {evidence['saved_position']} batches into an epoch of {evidence.get('epoch_batches')}, "
            "resumed at the epoch's first batch"
        )
    if evidence.get("saved_loss") is not None:
        after = evidence.get("resumed_loss")
        text = f"loss {_number(evidence['saved_loss'])} at the save"
        details.append(text + (f", {_number(after)} at the first step after" if after is not None else ""))
    return details


def message(evidence: Mapping[str, Any]) -> str:
    lost = [_PARTS.get(str(part), str(part)) for part in evidence.get("lost") or []]
    parts = ", ".join(lost[:-1]) + f" and {lost[-1]}" if len(lost) > 1 else "".join(lost)
    where = f" at {evidence['where']}" if evidence.get("where") else ""
    checkpoint = evidence.get("checkpoint", "a checkpoint")
    if evidence.get("framework") == "accelerate":
        text = f"The run resumed from {checkpoint} through Accelerator.load_state{where} but not {parts}"
    else:
        text = f"The run resumed from {checkpoint}{where} with its weights but not {parts}, which the checkpoint holds"
    details = _details(evidence)
    return text + (f" ({'; '.join(details)})" if details else "")


def fix(evidence: Mapping[str, Any]) -> str | None:
    """The fix in the framework's own terms (None: the spec's)."""
    framework = evidence.get("framework")
    if framework == "transformers":
        return (
            "Resume with the Trainer's own state: trainer.train(resume_from_checkpoint=True) (the "
            f"newest checkpoint of output_dir) or resume_from_checkpoint={evidence.get('checkpoint')!r}, "
            "instead of from_pretrained on the checkpoint folder and a new train() from step 0."
        )
    if framework == "lightning":
        return (
            "Resume with trainer.fit(model, ckpt_path=...): Lightning then restores the optimizer "
            "and scheduler states, the epoch and the global step; load_from_checkpoint restores "
            "the weights and hyperparameters only."
        )
    lost = evidence.get("lost") or []
    if framework == "accelerate":
        return _accelerate_fix(lost, evidence)
    calls = {
        OPTIMIZER: "optimizer.load_state_dict(checkpoint[...])",
        SCHEDULER: "scheduler.load_state_dict(checkpoint[...])",
        SCALER: "scaler.load_state_dict(checkpoint[...])",
        STEP: "the step/epoch counter restored from the checkpoint",
    }
    # The optimizer's state dict brings its step count back with its moments.
    wanted = [calls[part] for part in lost if part in calls and not (part == STEP and OPTIMIZER in lost)]
    if RNG in lost:
        restored = evidence.get("restored_rng") or []
        wanted += [
            _RNG_CALLS[kind]
            for kind in evidence.get("saved_rng") or []
            if kind in _RNG_CALLS and kind not in restored
        ]
    if DATA in lost:
        wanted.append(
            _skip(
                evidence, "itertools.islice(loader, {k}, None) for that epoch, its sampler seeded as before"
            )
        )
    if not wanted:
        return None
    return (
        f"After model.load_state_dict, restore the rest of the checkpoint: {', '.join(wanted)}, "
        "with the optimizer, scheduler and scaler built as before the save."
    )


#: The call that restores each random generator's saved state.
_RNG_CALLS = {
    "torch": "torch.set_rng_state(checkpoint[...])",
    "cuda": "torch.cuda.set_rng_state_all(checkpoint[...])",
    "numpy": "numpy.random.set_state(checkpoint[...])",
    "python": "random.setstate(checkpoint[...])",
}


def _skip(evidence: Mapping[str, Any], how: str) -> str:
    """Skipping the batches the interrupted epoch had trained on before the save."""
    k = evidence.get("saved_position") or "k"
    return f"the first {k} batches of the interrupted epoch skipped ({how.format(k=k)})"


def _accelerate_fix(lost: list[str], evidence: Mapping[str, Any]) -> str:
    wanted = []
    if SCHEDULER in lost:
        wanted.append(
            "pass the scheduler to accelerator.prepare(...) (or accelerator.register_for_checkpointing"
            "(scheduler)) before save_state, so that save_state saves it and load_state restores it"
        )
    if DATA in lost:
        wanted.append(
            "after accelerator.load_state, train the interrupted epoch from "
            f"accelerator.skip_first_batches(train_dataloader, {evidence.get('saved_position') or 'k'})"
        )
    if not wanted:
        wanted.append(
            "register every object that holds training state with accelerator.register_for_checkpointing"
        )
    text = "; ".join(wanted)
    return text[0].upper() + text[1:] + "."


RULES: tuple[Rule, ...] = (observation_rule(SPEC, OBSERVATION, message, fix),)
