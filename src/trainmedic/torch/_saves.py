"""What a script saved, reloaded as a user would load it, against the model in memory (TOR015, TOR016).

A run can be perfect and its result lost at the save: a classification head outside the
adapter's `modules_to_save` (the adapter reloads onto a fresh random head), an adapter written
under ZeRO-3/FSDP without gathering (empty tensors) or before it trained (`lora_B` all zero),
weights that overflow to inf, a tokenizer and its chat template not saved beside the model.
`install` wraps the saves (always calling the original unchanged):

- `torch.save(state_dict, path)` of a mapping of tensors: the file's tensors are read back (by the
  worker when one runs, else at the end, in this process: no second start of torch), the dict's
  FSDP2 shards (DTensors not gathered) counted in the call (`_save_shards`); a dict of a module
  the guard knows is loaded strictly into a copy of that module, here (`_save_reload`);
- `PreTrainedModel.save_pretrained` and `PeftModel.save_pretrained` (what `Trainer.save_model`
  calls): the folder's tensors are read back, and the model is reloaded with the framework's
  loader (`<ModelClass>.from_pretrained(folder)`; for an adapter, the base loaded with the
  script's config, then `PeftModel.from_pretrained(base, folder)`) and run on the probe;
- `merge_and_unload`: the merged model's outputs on the probe against the adapter model's,
  compared in the process (both are in memory then), and the share of the adapter's weight
  change that the merged weights hold (a 16-bit base rounds a small change away:
  `_merge_weights`);
- Lightning's `Trainer.save_checkpoint` (`ModelCheckpoint`'s): the checkpoint's `state_dict` read
  back, each tensor's bytes compared with the module's at the save (copied in the call); a
  module with a forward of its own is rebuilt with its `load_from_checkpoint`, here
  (`_save_reload`).

The save call only copies the model as it was saved (`_save_copy.freeze`: its weights cloned,
its modules copied onto the clones) and returns; the copy is held until the training ends
(`_save_hold`: the newest per path, within a share of the available memory; one that does not
fit is probed at once in a thread of the process). Then a probe (rows of the batch the model was
last seen with on a checked step, `_save_inputs`, else `_save_probe.PROBE_TOKENS` random token
ids drawn from a generator of its own, not the run's random state) runs on the copy under
no_grad in eval mode, and writes the probe, the outputs and the base's config into a scratch
folder (the run folder under `trainmedic run`, else a temp dir; never the user's output folder);
a model on an accelerator is probed in the save call itself (see `_save_copy`). Then
`trainmedic.torch._save_worker`, a separate, uninstrumented process, reloads and measures: in
the SCHED_IDLE class while the training runs, at nice 10 after. At the end (`finish`) the held
copies are probed, the process waits for its worker (`WAIT_AT_EXIT` at most) and observes its
results, and checks that every model folder saved in a run that rendered a chat template holds
the tokenizer with that template.

Bounds: one worker running at a time (the others wait their turn), one check per saved path per
`MIN_INTERVAL` seconds (a held copy is replaced at every save of its path: its file is
overwritten), `MAX_CHECKS` per process; models above `MAX_BYTES` are skipped with a one-line note.
Off with TRAINMEDIC_SAVE_CHECKS=0.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import torch
from trainmedic.instrument import hooks
from trainmedic.instrument.save_scratch import ScratchFolders
from trainmedic.torch import _save_copy as save_copy
from trainmedic.torch import _save_hold as save_hold
from trainmedic.torch import _save_inputs as save_inputs
from trainmedic.torch import _save_probe as save_probe
from trainmedic.torch import _save_reload as save_reload
from trainmedic.torch import _save_results as save_results
from trainmedic.torch import _save_shards as save_shards
from trainmedic.torch import _save_worker as save_worker
from trainmedic.torch._safety import contained

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike

Wrap = Callable[[Any, str, Callable[[Any], Any]], None]
Active = Callable[[], "MonitorLike | None"]

OFF_ENV = "TRAINMEDIC_SAVE_CHECKS"
# A second copy of the model is loaded by the worker, on the CPU: beyond this size the check
# would compete with training for host memory. 4 GiB holds a 1B model in fp32, 2B in bf16.
MAX_BYTES = 4 * 2**30
MIN_INTERVAL = 60.0  # seconds between two checks of one saved path (a save every few steps)
MAX_CHECKS = 16  # per process: the first saves and the final one are what matter
TEMP_PREFIX = "trainmedic-saves-"
POLL = 0.05  # seconds between two looks for the worker's results at the end
WAIT_AT_EXIT = 300.0  # seconds a worker may still run when the script ends
PEEK = 8  # values looked at to tell a state dict
READ_HERE = ("state_dict", "lightning")  # read back only: by the worker when one runs, else here at the end


@dataclass
class Job:
    """One save under check: the worker started for it and what the process knew at the save."""

    kind: str  # "state_dict", "lightning", "transformers", "peft"
    path: str
    where: str
    step: int
    scratch: Path


@dataclass
class SaveChecks:
    """The process's saves: the jobs, when each path was last checked, the chat tokenizers seen."""

    jobs: list[Job] = field(default_factory=list)
    worker: subprocess.Popen[bytes] | None = None
    last: dict[str, float] = field(default_factory=dict)
    # model folders saved (save_pretrained), each with the chat templates rendered before its save
    folders: dict[str, set[str]] = field(default_factory=dict)
    chat_tokenizers: weakref.WeakSet[Any] = field(default_factory=weakref.WeakSet)
    busy: int = 0  # inside a save: a save that calls another is checked once
    probes: list[threading.Event] = field(default_factory=list)  # set when a copy's probe is done
    held: list[threading.Event] = field(default_factory=list)  # set when the save call returns
    notes: set[str] = field(default_factory=set)
    sharded_paths: set[str] = field(default_factory=set)  # saves of FSDP shards observed
    deferred: save_hold.Holds = field(default_factory=save_hold.Holds)  # probed when training ends
    ending: bool = False  # the checks finish: the training no longer runs


_state = SaveChecks()
_pumping = threading.Lock()
# under the run folder's save-checks/, one queue per process (each has its own worker)
_scratch = ScratchFolders("", TEMP_PREFIX)
_active: Active | None = None
_pause: save_probe.Pause = contextlib.nullcontext  # the guard's `_patches.paused`, given at install
_exit_registered = False


def enabled() -> bool:
    return os.environ.get(OFF_ENV, "1") != "0"


def install(wrap: Wrap, active: Active, pause: save_probe.Pause) -> None:
    """Wrap `torch.save`, and the frameworks' saves once they are imported; `pause` pauses the
    guard's hooks while a probe or a read-back runs a model here; an earlier guard's state goes."""
    global _state, _active, _pause
    _state = SaveChecks()
    if not enabled():
        return
    wrap(torch, "save", lambda original: _torch_save(original, active))

    def when(module_name: str, install_one: Callable[[Any], None]) -> None:
        def fire(module: Any) -> None:
            if active() is not None:  # the guard may have stopped before the import
                install_one(module)
                save_copy.prepare()  # a model to save: the thread its probes run on

        hooks.when_imported(module_name, fire)

    when(
        "transformers.modeling_utils",
        lambda m: wrap(
            m.PreTrainedModel, "save_pretrained", lambda o: _save_pretrained(o, active, "transformers")
        ),
    )
    when(
        "peft.peft_model",
        lambda m: wrap(m.PeftModel, "save_pretrained", lambda o: _save_pretrained(o, active, "peft")),
    )
    when(
        "peft.tuners.tuners_utils",
        lambda m: wrap(
            m.BaseTuner, "merge_and_unload", lambda o: save_probe.wrap_merge_and_unload(o, active, pause)
        ),
    )
    when(
        "lightning.pytorch.trainer.trainer",
        lambda m: wrap(m.Trainer, "save_checkpoint", lambda o: _save_checkpoint(o, active)),
    )
    when(
        "transformers.tokenization_utils_base",
        lambda m: wrap(m.PreTrainedTokenizerBase, "apply_chat_template", _apply_chat_template),
    )
    _active, _pause = active, pause


def _finish_at_exit() -> None:
    monitor = _active() if _active is not None else None
    if monitor is not None and not monitor.broken:
        contained(monitor, "save checks", finish, monitor)


# -- the wrappers --------------------------------------------------------------------------------


def _torch_save(original: Any, active: Active) -> Any:
    def save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(obj, f, *args, **kwargs)
        monitor = active()
        if (
            monitor is not None
            and not monitor.broken
            and not _state.busy
            and isinstance(f, (str, os.PathLike))
            and _is_state_dict(obj)
        ):
            caller = sys._getframe(1)
            shards = _state.sharded_paths
            contained(monitor, "torch.save", save_shards.observe, monitor, obj, f, caller, shards)
            owner = contained(monitor, "torch.save", save_reload.owner, monitor.roots(), obj, MAX_BYTES)
            contained(monitor, "torch.save", after_save, monitor, "state_dict", owner, f, caller)
            _release()  # the reload of a module's state dict may run (`_save_reload`)
        return result

    return save


def _save_pretrained(original: Any, active: Active, kind: str) -> Any:
    def save_pretrained(self: Any, save_directory: Any, *args: Any, **kwargs: Any) -> Any:
        _state.busy += 1
        try:
            result = original(self, save_directory, *args, **kwargs)
        finally:
            _state.busy -= 1
        monitor = active()
        main = kwargs.get("is_main_process", args[0] if args and kind == "transformers" else True)
        if monitor is not None and not monitor.broken and not _state.busy and main:
            contained(
                monitor, "save_pretrained", after_save, monitor, kind, self, save_directory, sys._getframe(1)
            )
        _release()
        return result

    return save_pretrained


def _save_checkpoint(original: Any, active: Active) -> Any:
    """Lightning's `Trainer.save_checkpoint` (what `ModelCheckpoint` calls): the checkpoint's
    `state_dict` read back and compared with the module's state at the save."""

    def save_checkpoint(self: Any, filepath: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, filepath, *args, **kwargs)
        monitor = active()
        module = getattr(self, "lightning_module", None)
        local = isinstance(filepath, (str, os.PathLike))  # not a remote fsspec URL
        if (
            monitor is not None
            and not monitor.broken
            and module is not None
            and self.is_global_zero
            and local
        ):
            caller = sys._getframe(1)
            contained(monitor, "save_checkpoint", after_save, monitor, "lightning", module, filepath, caller)
        _release()
        return result

    return save_checkpoint


def _release() -> None:
    """The save call returns: its probe's thread may run (`_save_copy.start`)."""
    while _state.held:
        _state.held.pop().set()


def _apply_chat_template(original: Any) -> Any:
    def apply_chat_template(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self not in _state.chat_tokenizers:
            with contextlib.suppress(TypeError):
                _state.chat_tokenizers.add(self)
        return original(self, *args, **kwargs)

    return apply_chat_template


def _is_state_dict(obj: Any) -> bool:
    """A mapping whose first values are all tensors (a model's state dict, not a checkpoint's
    dict of dicts or an optimizer's state)."""
    if not isinstance(obj, Mapping) or not obj:
        return False
    return all(isinstance(v, torch.Tensor) for v in islice(obj.values(), PEEK))


# -- the snapshot, in the training process -------------------------------------------------------


def after_save(monitor: MonitorLike, kind: str, model: Any, target: Any, caller: FrameType) -> None:
    """Snapshot what the check needs and hand it to a worker process."""
    global _exit_registered
    if not _exit_registered:  # registered after the monitor's close: atexit runs it before
        _exit_registered = True
        atexit.register(_finish_at_exit)
    path = str(Path(os.fspath(target)).resolve())
    if path in _state.sharded_paths:
        return  # shards (observed in the call): reading them back would need the process group
    if kind != "state_dict":
        _state.folders.setdefault(path, set()).update(_templates())
    now = time.monotonic()
    recent = now - _state.last.get(path, -MIN_INTERVAL) < MIN_INTERVAL
    # an earlier save of the path not compared yet is stale once its file is overwritten: replaced
    replaced = save_hold.drop_unchecked(_state.jobs, path)
    if not _state.deferred.holding(path) and not replaced and (len(_state.jobs) >= MAX_CHECKS or recent):
        return
    job = Job(kind, path, save_probe.where(caller), monitor.step, _scratch.next())  # the script's line
    spec: dict[str, Any] = {"kind": kind, "path": path}
    if model is not None:
        size = sum(p.numel() * p.element_size() for p in model.parameters())
        if size > MAX_BYTES:
            _note(
                f"the model saved to {path} ({size / 2**30:.1f} GiB) is not reloaded: "
                f"over {MAX_BYTES >> 30} GiB"
            )
            return
        if kind in save_reload.KINDS and _reload_here(kind, model, job, spec, now):
            return
        if kind == "lightning":  # the module's state as saved, fingerprinted off the training thread
            state = {
                k: v.detach().to("cpu", copy=True)
                for k, v in model.state_dict().items()
                if isinstance(v, torch.Tensor)
            }
            _state.last[path] = now
            _state.jobs.append(job)
            _probe_later(state, lambda s: _fingerprint(s, spec, job), job)
            return
        copied = save_copy.freeze(model)
        rows = save_inputs.rows_for(model, text=True)  # a row of the run's batch, copied at the save
        if copied is not None:
            # The model copied here, the copy probed when training ends: the save returns at once.
            _state.last[path] = now
            _state.jobs.append(job)
            _probe_later(copied, lambda c: _probe_copy(c, kind, spec, job, rows), job)
            return
        # On an accelerator: the probe's forward here (its kernels queue behind the save's).
        probe = save_probe.snapshot(model, kind, job.scratch, _pause, rows)
        if probe is None:
            spec["kind"] = f"{kind}-files"  # read back, not reloaded
        else:
            spec.update(probe)
    _state.last[path] = now
    _state.jobs.append(job)
    _hand_over(job, spec)


def _reload_here(kind: str, model: Any, job: Job, spec: dict[str, Any], now: float) -> bool:
    """A plain state dict's module or a Lightning module copied, to be reloaded in this process
    off the training thread (`_save_reload`); False: a Lightning checkpoint not reloaded here."""
    reload = save_reload.prepare(kind, model, job.path)
    if reload is None and kind != "state_dict":
        return False
    _state.last[job.path] = now
    _state.jobs.append(job)
    if reload is None:  # not copied (on an accelerator): read back only
        _hand_over(job, spec)
    else:
        _probe_later(reload.copied, lambda c: _hand_over(job, reload.check(c, spec)), job)
    return True


def _probe_later(copied: Any, probe: Callable[[Any], None], job: Job) -> None:
    """Hold the copy until the training ends (`_save_hold`), or, when it does not fit, probe it
    in the probes' thread once the save call has returned."""
    copy = save_hold.Held(job.path, copied, probe, save_hold.nbytes(copied), job)
    held, dropped = _state.deferred.hold(copy)
    for earlier in dropped:  # the file it was saved to is overwritten or removed: nothing to compare
        _state.jobs.remove(earlier.job)
        with contextlib.suppress(OSError):
            earlier.job.scratch.rmdir()
    if held:
        return
    go = threading.Event()
    _state.held.append(go)
    _state.probes.append(save_copy.start(copied, probe, go))


def _fingerprint(state: dict[str, Any], spec: dict[str, Any], job: Job) -> None:
    """In the probe's thread: each tensor's fingerprint, for the worker to compare the file with."""
    spec["fingerprints"] = {k: save_worker.fingerprint(v) for k, v in state.items()}
    _hand_over(job, spec)


def _probe_copy(
    copied: Any, kind: str, spec: dict[str, Any], job: Job, rows: save_inputs.Rows | None
) -> None:
    """In the probe's thread: the copy's outputs on the probe, then the job to the worker."""
    try:
        probe = save_probe.snapshot(copied, kind, job.scratch, contextlib.nullcontext, rows)
    except Exception as exc:  # the check reads the files only; the run is not concerned
        probe = None
        _note(f"the model saved to {job.path} is read back, not reloaded: its probe failed ({exc!r:.200})")
    if probe is None:
        spec["kind"] = f"{kind}-files"
    else:
        spec.update(probe)
    _hand_over(job, spec)


def _hand_over(job: Job, spec: dict[str, Any]) -> None:
    partial = job.scratch / "job.json.part"
    partial.write_text(json.dumps(spec))
    partial.rename(job.scratch / "job.json")  # whole when the worker sees it
    _pump()


def _pump() -> None:
    """Start the worker when none runs and a save to reload has no result (one worker at a time:
    it takes the jobs in the order of the saves, plain state dicts included, and waits a while
    for more before it exits). Plain state dicts alone start no worker: their files are read
    back at the end, in this process (`finish`), without a second start of torch."""
    with _pumping:  # the probe's threads and the training thread
        if _state.worker is not None and _state.worker.poll() is None:
            return
        if not any(_waiting(job) for job in list(_state.jobs)):
            return
        # while training runs, the worker takes only the CPU no one else wants (`launch`)
        _state.worker = save_worker.launch(_state.jobs[0].scratch.parent, idle=not _state.ending)


def _waiting(job: Job) -> bool:
    """A reload written for the worker and not done (a probe still running in its thread writes
    its job later, and pumps then)."""
    return (
        job.kind not in READ_HERE
        and (job.scratch / "job.json").exists()
        and not (job.scratch / "result.json").exists()
    )


def _templates() -> set[str]:
    """The chat templates of the tokenizers that rendered one so far."""
    found = (getattr(tokenizer, "chat_template", None) for tokenizer in list(_state.chat_tokenizers))
    return {template for template in found if isinstance(template, str)}


def _note(text: str) -> None:
    if text not in _state.notes:
        _state.notes.add(text)
        print(f"trainmedic: {text}", file=sys.stderr)


# -- the end: the workers' results judged ---------------------------------------------------------


def finish(monitor: MonitorLike, wait: float = WAIT_AT_EXIT) -> None:
    """Wait for the worker, observe what its results show, check the tokenizers saved; then
    start afresh (a later guard in the process checks its own saves)."""
    global _state
    if not _state.jobs and not _state.folders:
        return
    deadline = time.monotonic() + wait
    _state.ending = True  # a worker started from now on is at nice 10; the one running is lifted
    with _pumping:
        _state.worker = save_worker.after_training(_state.worker)
    with _pause():
        _state.deferred.probe_all(_state.jobs.remove)  # each hands its job to the worker
    for probe in _state.probes:  # the probes of the last saves, off the training thread
        probe.wait(timeout=max(0.0, deadline - time.monotonic()))
    while not _all_done(reloads_only=True) and time.monotonic() < deadline:
        worker = _state.worker
        if worker is not None and worker.poll() not in (None, 0):
            break  # the worker could not start (its stderr is in the scratch folder)
        _pump()  # a worker that exited idle before the last save's job came is started again
        time.sleep(POLL)
    worker = _state.worker
    if worker is not None and worker.poll() is None:
        worker.terminate()  # idle, waiting for a next job that will not come
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.wait(timeout=5)
    _read_back_here()
    if not _all_done():
        _note(f"the checks of some saves did not finish in {wait:.0f} s")
    for job in _state.jobs:
        result_file = job.scratch / "result.json"
        if result_file.exists():
            save_results.observe(monitor, job, json.loads(result_file.read_text()))
    save_results.check_tokenizers(monitor, _state.folders)
    _state = SaveChecks()
    _drop_temp_scratch()


def _drop_temp_scratch() -> None:
    """A temporary scratch root goes when its checks end; a run folder's stays."""
    _scratch.drop_temporary()


def _all_done(*, reloads_only: bool = False) -> bool:
    """Whether every job (every job but those only read back, `READ_HERE`) has its result."""
    return all(
        (job.scratch / "result.json").exists()
        for job in list(_state.jobs)
        if not (reloads_only and job.kind in READ_HERE)
    )


def _read_back_here() -> None:
    """Read back, in this process and with the guard's hooks paused, the files no worker read
    (`READ_HERE`): the script has ended, torch is loaded here, and a file is only read."""
    with _pause():
        for job in _state.jobs:
            written = (job.scratch / "job.json").exists()  # a probe that did not finish: none
            if job.kind in READ_HERE and written and not (job.scratch / "result.json").exists():
                save_worker.run_job(job.scratch / "job.json")
