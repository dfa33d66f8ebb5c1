"""TOR017's measure in a PyTorch process: a resume that loads the weights and not the rest.

A resume is recognised by what PyTorch sees, with no help from the script: `torch.load` returns
a checkpoint that holds an optimizer's state dict (the tutorial's
`{"model_state_dict", "optimizer_state_dict", "epoch", "loss"}`, a Lightning checkpoint's
`optimizer_states`), and a model then loads its weights from that very object
(`model.load_state_dict(checkpoint["model_state_dict"])`). From then on, until the first
optimizer step, the `load_state_dict` calls of optimizers, LR schedulers and GradScalers are
counted, and so are the calls that restore the random generators' states (`_rng`); at that
step (a one-off optimizer pre-hook, removed when it has run) the optimizer that steps is
compared with what the checkpoint held, and `trainmedic.rules.tor.tor017_resume_state_lost`
judges it.

The data position is read at the same step, from what the guard already keeps: the DataLoader
iterators it follows (`_batches.BatchLog`, made when an epoch starts). When exactly one
iterator was started since the resume, is still going, draws from PyTorch's own samplers (which
always begin an epoch at its start) and has yielded one batch for this step (one more for a
loader that draws one ahead, as Accelerate's do), the step trains on the epoch's first batch;
the checkpoint was saved `saved.step % len(batch sampler)` batches into its epoch. The saved
optimizer step counts the batches only where each step is one batch and every step was taken:
a loop that accumulates gradients is not judged (it yields several batches before its first
step), nor a checkpoint with a GradScaler (its skipped steps are not counted).

Accelerate's `load_state` (`_accelerate`) starts the same watch with `watch_folder`; LR
schedulers are followed from their creation (a weak set) so that one which drives the restored
optimizer and was not restored is seen.

Cost: `torch.load` and the `load_state_dict` calls are rare and off the training step. A load
reads the top-level entries of what it returns (and the lists among them) once; the step
pre-hook exists only between a resume and the next optimizer step.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from torch.optim import lr_scheduler
from torch.optim.optimizer import Optimizer, register_optimizer_step_pre_hook
from torch.utils.data import BatchSampler, DistributedSampler, RandomSampler, SequentialSampler

import torch
from torch import nn
from trainmedic.rules.tor import tor017_resume_state_lost as tor017
from trainmedic.torch import _rng
from trainmedic.torch._aside import aside
from trainmedic.torch._safety import contained

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike

Wrap = Callable[[Any, str, Callable[[Any], Any]], None]
Active = Callable[[], "MonitorLike | None"]

PEEK = 8  # values looked at to tell a state dict of tensors
MAX_NOTES = 4  # checkpoints remembered until a model loads from one of them
#: Top-level entries of a checkpoint that count steps or epochs (kept as evidence).
COUNTERS = ("epoch", "step", "global_step", "iteration", "iter_num")
_OWN = str(Path(__file__).parent.parent)  # the trainmedic package's folder
#: Samplers that begin every epoch at its first index: a fresh iterator's first batch is the epoch's.
EPOCH_START_SAMPLERS = (RandomSampler, SequentialSampler, DistributedSampler)


@dataclass(slots=True)
class Saved:
    """What one loaded checkpoint holds besides the weights."""

    checkpoint: str
    framework: str
    # The model state dicts inside, by id, each with a weak reference to its first tensor: a
    # state dict is matched by identity without being kept (an id alone may be reused).
    models: dict[int, weakref.ref[torch.Tensor]]
    parts: dict[str, bool]
    moments: int = 0
    lr: float | None = None
    step: int | None = None
    shapes: list[tuple[int, ...] | None] = field(default_factory=list)  # per parameter, from its moments
    counters: dict[str, int] = field(default_factory=dict)
    loss: float | None = None
    scale: float | None = None
    rng: list[str] = field(default_factory=list)  # the generators whose states it holds

    def holds(self, state_dict: Any) -> bool:
        """Whether `state_dict` is one of the model state dicts this checkpoint held."""
        first = self.models.get(id(state_dict))
        return first is not None and isinstance(state_dict, Mapping) and _first_tensor(state_dict) is first()


@dataclass(slots=True)
class _State:
    notes: list[Saved] = field(default_factory=list)
    resumed: Saved | None = None
    where: str = ""
    loaded: set[str] = field(default_factory=set)
    rng_restored: set[str] = field(default_factory=set)
    hook: Any = None
    loaders_before: tuple[Any, ...] = ()  # the loader iterators' logs at the resume
    draw_ahead: set[int] = field(default_factory=set)  # ids of batch samplers whose loader draws one ahead
    schedulers: weakref.WeakSet[Any] = field(default_factory=weakref.WeakSet)


_state = _State()


def install(wrap: Wrap, active: Active) -> None:
    """Wrap `torch.load` and the `load_state_dict` of modules, optimizers, schedulers and scalers."""
    wrap(torch, "load", lambda original: _load(original, active))
    wrap(nn.Module, "load_state_dict", lambda original: _model_load(original, active))
    wrap(Optimizer, "load_state_dict", lambda original: _part_load(original, tor017.OPTIMIZER))
    wrap(torch.amp.GradScaler, "load_state_dict", lambda original: _part_load(original, tor017.SCALER))
    _rng.install(wrap, _rng_restored)
    wrap(lr_scheduler.LRScheduler, "_initial_step", _scheduler_made)
    schedulers = (lr_scheduler.LRScheduler, lr_scheduler.ReduceLROnPlateau)
    for cls in vars(lr_scheduler).values():
        # The module also holds what it imports (Optimizer): its own schedulers only.
        if isinstance(cls, type) and issubclass(cls, schedulers) and "load_state_dict" in vars(cls):
            wrap(cls, "load_state_dict", lambda original: _part_load(original, tor017.SCHEDULER))


def _load(original: Any, active: Active) -> Any:
    def load(f: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(f, *args, **kwargs)
        monitor = active()
        if monitor is not None and not monitor.broken and isinstance(result, Mapping) and not aside():
            contained(monitor, "torch.load", _note, result, f)
        return result

    return load


def _note(result: Mapping[str, Any], f: Any) -> None:
    """Remember a checkpoint that holds an optimizer's state and a model's weights."""
    saved = read_checkpoint(result, _name(f))
    if saved is not None:
        _state.notes = [*_state.notes[-(MAX_NOTES - 1) :], saved]


def _model_load(original: Any, active: Active) -> Any:
    def load_state_dict(self: Any, state_dict: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, state_dict, *args, **kwargs)
        if _state.notes and active() is not None and not aside():  # not the save checks' reload
            found = next((n for n in reversed(_state.notes) if n.holds(state_dict)), None)
            if found is not None:
                _resume(found, sys._getframe(1), active)
        return result

    return load_state_dict


def _part_load(original: Any, part: str) -> Any:
    def load_state_dict(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        if _state.resumed is not None:
            _state.loaded.add(part)
        return result

    return load_state_dict


def _rng_restored(kind: str) -> None:
    if _state.resumed is not None:
        _state.rng_restored.add(kind)


def _scheduler_made(original: Any) -> Any:
    """Follow every LR scheduler (weakly) from its creation: its first, initial step."""

    def _initial_step(self: Any) -> None:
        _state.schedulers.add(self)
        original(self)

    return _initial_step


def _resume(saved: Saved, caller: FrameType, active: Active) -> None:
    """A model loaded its weights from `saved`: watch the state until the next optimizer step."""
    _state.notes = [n for n in _state.notes if n is not saved]
    watch(saved, user_line(caller), active)


def watch(saved: Saved, where: str, active: Active, draw_ahead: set[int] | None = None) -> None:
    """Watch what is restored from `saved` until the next optimizer step, where it is compared
    (`draw_ahead`: the batch samplers whose loaders pull one batch before the one in hand)."""
    monitor = active()
    _state.resumed, _state.loaded, _state.where = saved, set(), where
    _state.rng_restored = set()
    _state.loaders_before = tuple(monitor.batches.logs) if monitor is not None else ()
    _state.draw_ahead = draw_ahead or set()
    if _state.hook is None:
        _state.hook = register_optimizer_step_pre_hook(lambda opt, args, kwargs: _first_step(opt, active))


def restored_from(saved: Saved | None) -> None:
    """What the watched resume restored, read once its load has run (Accelerate's folder): the
    restores counted since `watch` stay counted. None: nothing to compare, the watch ends."""
    if _state.resumed is None:
        return
    _state.resumed = saved
    if saved is None:
        _state.loaders_before = ()
        if _state.hook is not None:
            _state.hook.remove()
            _state.hook = None


def _last_pre_hook(hook_id: int) -> bool:
    """Whether the hook is the last of PyTorch's global pre-step hooks. PyTorch iterates that
    OrderedDict while it calls them, and removing an entry other than the last during the
    iteration raises: a hook followed by another stays, idle (nothing is watched), until a
    later step finds it last, or the next resume's watch uses it."""
    from torch.optim import optimizer as torch_optimizer

    return next(reversed(torch_optimizer._global_optimizer_pre_hooks), None) == hook_id


def _first_step(optimizer: Any, active: Active) -> None:
    """The first optimizer step after a resume: compare, then stop watching."""
    saved, loaded, where = _state.resumed, set(_state.loaded), _state.where
    if saved is not None and saved.rng and set(saved.rng) <= _state.rng_restored:
        loaded.add(tor017.RNG)
    _state.resumed = None
    if _state.hook is not None and _last_pre_hook(_state.hook.id):
        _state.hook.remove()
        _state.hook = None
    monitor = active()
    if saved is None or not saved.checkpoint or monitor is None or monitor.broken:
        return  # (no checkpoint name: a folder's load that never said what it restored)
    before, _state.loaders_before = _state.loaders_before, ()
    contained(monitor, "resume check", _compare, monitor, optimizer, saved, loaded, line=where, before=before)


def _compare(
    monitor: MonitorLike,
    optimizer: Any,
    saved: Saved,
    loaded: set[str],
    *,
    line: str,
    before: tuple[Any, ...],
) -> None:
    params = [p for group in optimizer.param_groups for p in group["params"]]
    states = [optimizer.state.get(p) for p in params]
    resumed_step = max((_int(s.get("step")) or 0 for s in states if s), default=0)
    parts = dict(saved.parts)
    position = _position(monitor, saved, before)
    if position is not None:
        parts[tor017.DATA] = position[0] > 0
    fresh = _fresh_schedulers(optimizer, loaded) if saved.framework == "accelerate" else []
    if fresh:
        parts[tor017.SCHEDULER] = True
    lost = tor017.judge(
        saved=parts,
        loaded={part: part in loaded for part in parts},
        same_parameters=same_parameters(saved.shapes, [tuple(p.shape) for p in params]),
        saved_step=saved.step,
        resumed_step=resumed_step if saved.step is not None else None,
    )
    if not lost:
        return
    evidence: dict[str, Any] = {
        "framework": saved.framework,
        "checkpoint": saved.checkpoint,
        "where": line,
        "lost": lost,
        "saved_moments": saved.moments,
        "resumed_moments": sum(1 for s in states if s),
        "saved_lr": saved.lr,
        "resumed_lr": _float(optimizer.param_groups[0].get("lr")),
        "saved_step": saved.step,
        "resumed_step": resumed_step,
        "saved_counters": saved.counters,
        "saved_loss": saved.loss,
    }
    if tor017.SCALER in lost:
        evidence["saved_scale"] = saved.scale
    if tor017.RNG in lost:
        evidence["saved_rng"] = saved.rng
        evidence["restored_rng"] = [kind for kind in _rng.KINDS if kind in _state.rng_restored]
    if tor017.DATA in lost and position is not None:
        evidence["saved_position"], evidence["epoch_batches"] = position
    if tor017.SCHEDULER in lost and fresh:
        evidence["resumed_lr"] = _float(fresh[0].get_last_lr()[0])
        evidence["scheduler_step"] = fresh[0].last_epoch
    losses = monitor.losses
    if losses:
        evidence["resumed_loss"] = _float(losses[-1])
    monitor.observe(tor017.OBSERVATION, evidence, step=monitor.step or None)


def _position(monitor: MonitorLike, saved: Saved, before: tuple[Any, ...]) -> tuple[int, int] | None:
    """(batches into its epoch at the save, the epoch's batches) when the step about to run trains
    on the first batch of an epoch begun since the resume; None when that is not known."""
    if saved.step is None or saved.parts.get(tor017.SCALER):
        return None
    started = [log for log in monitor.batches.logs if not log.done and not any(log is old for old in before)]
    if len(started) != 1:
        return None
    log = started[0]
    index = getattr(log.iterator(), "_index_sampler", None)
    if type(index) is not BatchSampler or type(index.sampler) not in EPOCH_START_SAMPLERS:
        return None
    lead = 1 if id(index) in _state.draw_ahead else 0
    if not log.at_start or len(log) - lead != 1:
        return None  # several batches a step (accumulation), or batches skipped by the loop
    batches = len(index)
    return (saved.step % batches, batches) if batches else None


def _fresh_schedulers(optimizer: Any, loaded: set[str]) -> list[Any]:
    """The LR schedulers that drive `optimizer` and were not restored since the resume."""
    if tor017.SCHEDULER in loaded:
        return []
    # A scheduler made on Accelerate's wrapper drives the optimizer inside it.
    drives = [(s, getattr(s, "optimizer", None)) for s in list(_state.schedulers)]
    return [
        s for s, driven in drives if optimizer is driven or optimizer is getattr(driven, "optimizer", None)
    ]


def read_folder(folder: str, framework: str, optimizer: Any, parts: dict[str, bool], rng: list[str]) -> Saved:
    """What a checkpoint folder restored into `optimizer` (Accelerate's `load_state`), read
    right after the load: its moments, learning rate and step are the saved ones."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    moments = [s for p in params if (s := optimizer.state.get(p))]
    return Saved(
        checkpoint=folder,
        framework=framework,
        models={},
        parts=parts,
        moments=len(moments),
        lr=_float(optimizer.param_groups[0].get("lr")) if optimizer.param_groups else None,
        step=_int(moments[0].get("step")) if moments else None,
        shapes=[tuple(p.shape) for p in params],
        rng=rng,
    )


def read_checkpoint(checkpoint: Mapping[str, Any], name: str) -> Saved | None:
    """What `checkpoint` holds besides the weights; None without an optimizer's state or a model's."""
    optimizers: list[Mapping[str, Any]] = []
    models: dict[int, weakref.ref[torch.Tensor]] = {}
    parts = {tor017.OPTIMIZER: False, tor017.SCHEDULER: False, tor017.SCALER: False}
    scale = None
    for value in _entries(checkpoint):
        if _is_optimizer(value):
            optimizers.append(value)
        elif isinstance(value, Mapping) and {"base_lrs", "last_epoch"} <= value.keys():
            parts[tor017.SCHEDULER] = True
        elif isinstance(value, Mapping) and {"scale", "growth_factor"} <= value.keys():
            parts[tor017.SCALER], scale = True, _float(value.get("scale"))
        elif (tensor := _first_tensor(value)) is not None:
            models[id(value)] = weakref.ref(tensor)
    if not optimizers or not models:
        return None
    first = optimizers[0]
    moments = [s for s in first["state"].values() if isinstance(s, Mapping) and s]
    # Adam and its kin keep one step count a parameter, all equal: the first one's is read.
    step = _int(moments[0].get("step")) if moments else None
    parts[tor017.OPTIMIZER] = bool(moments)
    groups = first["param_groups"]
    rng = _rng.kinds_in(checkpoint)
    parts[tor017.RNG] = bool(rng)
    return Saved(
        checkpoint=name,
        framework="lightning" if "pytorch-lightning_version" in checkpoint else "torch",
        models=models,
        parts=parts,
        moments=len(moments),
        lr=_float(groups[0].get("lr")) if groups else None,
        step=step,
        shapes=[_shape(first["state"].get(i)) for g in groups for i in g.get("params", ())],
        counters={k: v for k in COUNTERS if isinstance(v := checkpoint.get(k), int)},
        loss=_float(checkpoint.get("loss")),
        scale=scale,
        rng=rng,
    )


def same_parameters(saved: list[tuple[int, ...] | None], current: list[tuple[int, ...]]) -> bool:
    """Whether the optimizer that steps holds the parameters the saved one did: as many, and of
    the shapes of the saved moments (a new head or another model changes them)."""
    return len(saved) == len(current) and all(
        s is None or s == c for s, c in zip(saved, current, strict=True)
    )


def _shape(state: Any) -> tuple[int, ...] | None:
    """The shape of a parameter's first moment tensor (its own shape), None without one."""
    if isinstance(state, Mapping):
        for value in state.values():
            if isinstance(value, torch.Tensor) and value.dim() > 0:
                return tuple(value.shape)
    return None


def _entries(checkpoint: Mapping[str, Any]) -> list[Any]:
    """The top-level values and the items of the top-level lists (Lightning's optimizer_states)."""
    found: list[Any] = []
    for value in checkpoint.values():
        if isinstance(value, (list, tuple)):
            found.extend(value[:PEEK])
        else:
            found.append(value)
    return found


def _is_optimizer(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and isinstance(value.get("state"), Mapping)
        and isinstance(value.get("param_groups"), list)
    )


def _first_tensor(value: Any) -> torch.Tensor | None:
    """The first tensor among a mapping's first few values (a state dict's), else None."""
    if not isinstance(value, Mapping):
        return None
    return next((v for v in islice(value.values(), PEEK) if isinstance(v, torch.Tensor)), None)


def _int(value: Any) -> int | None:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return int(value.item())
    return int(value) if isinstance(value, (int, float)) else None


def _float(value: Any) -> float | None:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value.detach().float().item())
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _name(f: Any) -> str:
    return Path(f).name if isinstance(f, (str, Path)) else type(f).__name__


def user_line(frame: FrameType | None) -> str:
    """file:line of the first caller outside trainmedic and the installed packages."""
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_OWN) and "site-packages" not in filename and "<frozen" not in filename:
            return f"{Path(filename).name}:{frame.f_lineno}"
        frame = frame.f_back
    return ""
