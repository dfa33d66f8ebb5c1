"""What the PyTorch guard measures, step by step, and the events it sends.

One `Monitor` per process is fed by the hooks of `_patches`. It measures and
reports facts (`GuardObservation`, `Step`, `Epoch`); the rules in
`trainmedic.rules.torch` and `trainmedic.rules.steps` decide what they mean.
The exception is a non-finite loss, which is decided here, so that
`on_nonfinite="stop"` can stop the run before the update.

Cost: every step only stores references and integers (the loss tensor, its
step, a counter, the DataLoader wait): no tensor op, no host sync, no event.
Anything that needs a tensor op or a host sync (`.item()`, gradient norms, the
inputs of the loss, finiteness) runs on sampled steps only, every `every`
steps, in one batched read. The trade-offs that follow, and how each is made up
for:

- A NaN/Inf loss is seen at the next sampled step, at most `every - 1` steps
  late, but reported with the step it first appeared at (every loss is kept
  with its step) and that step's batch indices. `on_nonfinite="stop"` checks
  every step instead (one scalar read per step) to stop before the update.
- The gradient norm is measured on sampled steps only. A one-step explosion
  between two samples shows in what the guard keeps anyway: the window's losses
  jump (or turn non-finite) and the parameter norm, measured then and every 5th
  sample, jumped too or is non-finite. That is sent as an `update_explosion`
  observation with the first abnormal step, and TRN007 reports it.

Every loss is kept, and the loss curve has one point per `base_every` steps
(a `Step` event with the window's mean loss, timing and data wait): on the
steps in between that end a window, the hook only notes the time, the data
wait and the learning rate. The reads and the gradient norms happen together on
checked steps, every `every` steps, and keep to a budget: after `WARMUP_CHECKS`
checks at the base rate, when the tensors are on the CPU (where a check's time
is all its own, not a wait for queued device work), the monitor times its
checks against the training time between them and widens `every` (in multiples
of the base, up to `MAX_EVERY_FACTOR` times it) until they cost at most
`CHECK_BUDGET` of the step time. On a tiny model on a CPU, whose steps are not
much longer than a check, the losses are then read, and gradient norms
measured, every 20-50 steps instead of 10 (the curve keeps its 10-step points;
a NaN is reported later but still at its own step); a `sampling` observation
says when and why, and the findings' evidence gives the rate. An `every` given
explicitly is kept as it is.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, ParamSpec, TypeVar

import torch
from torch import nn
from trainmedic.errors import TrainmedicError
from trainmedic.events import Epoch, Event, FindingRaised, GuardObservation, Step
from trainmedic.instrument import channel
from trainmedic.record import median
from trainmedic.rules.dynamics import NONFINITE_LOSS
from trainmedic.torch._clipping import ClipWatch
from trainmedic.torch._forward import ForwardWatch
from trainmedic.torch._manual import ParameterUpdates, held_by_any, trained_parameters
from trainmedic.torch._zeroing import GradZeroWatch

PARAM_NORM_EVERY = 5  # a parameter-norm baseline every 5th sampled step
JUMP_FACTOR = 10.0  # a loss and a parameter norm both 10x their level before: an update blew up
JUMP_MIN_HISTORY = 5  # finite losses needed before a jump can be judged
MAX_KEPT_LOSSES = 4096  # backward without optimizer steps: read them back to keep memory flat
DEFAULT_EVERY = 10  # steps between sampled checks, unless widened to keep to the budget
CHECK_BUDGET = 0.005  # sampled checks may cost this share of the training time
WARMUP_CHECKS = 10  # checks at the base rate before the rate adapts: early failures at full rate
MAX_EVERY_FACTOR = 5  # the rate never drops below one check per 5 x the base every
# An optimizer holds the loss's parameters but has not stepped after this many backward calls:
# no accumulation is that long, so the loop updates them itself and backward() is its step.
IDLE_OPTIMIZER_BACKWARDS = 256
# Gradients are watched for zeroing over the last 8 steps before each check: a loop that
# never zeroes shows it in any span that includes an update, at a fraction of the cost.
ZERO_WATCH_STEPS = 8

Sink = Callable[[Event], None]
P = ParamSpec("P")
R = TypeVar("R")


class NonFiniteLossError(TrainmedicError, RuntimeError):
    """Raised with `on_nonfinite="stop"` before the optimizer applies a NaN/Inf update."""

    def __init__(self, message: str, finding: dict[str, Any]) -> None:
        super().__init__(message)
        self.finding = finding


def _never_breaks(method: Callable[P, R]) -> Callable[P, R | None]:
    """A failure inside the guard turns the guard off (one line on stderr), never the training."""

    @functools.wraps(method)
    def safe(*args: P.args, **kwargs: P.kwargs) -> R | None:
        monitor = args[0]
        if getattr(monitor, "broken", False):
            return None
        try:
            return method(*args, **kwargs)
        except NonFiniteLossError:
            raise
        except Exception as exc:
            monitor.broken = True  # type: ignore[attr-defined]
            sys.stderr.write(
                f"trainmedic: PyTorch guard turned off by an internal error in {method.__name__}: {exc!r}\n"
            )
            return None

    return safe


class _WindowEnd(NamedTuple):
    """Where a loss window ended between two checks: its Step event is sent at the next one."""

    step: int
    time: float  # perf_counter
    data_wait: float  # the monitor's data wait accumulated since the last check
    lr: float | None
    epoch: int


@dataclass(eq=False, slots=True)
class _OptState:
    """What the monitor keeps about one optimizer (looked up by id, checked by a weakref)."""

    ref: Any  # weakref to the optimizer
    name: str
    steps: int = 0
    checks: int = 0
    pre_done: bool = False
    zero_watch: GradZeroWatch | None = None  # on the parameter whose gradient tells if grads were zeroed
    probe_name: str = ""
    not_zeroed: int = 0  # optimizer steps without zeroing, as of the last check
    zero_checked_step: int = 0
    never_grad: set[int] | None = None
    checked_steps: list[int] = field(default_factory=list)


class Monitor:
    """Measures one process's PyTorch training through global hooks.

    The attributes the hooks of `_patches` write on every step are plain ones
    (`backwards`, `losses`, `loss_steps`, `data_wait`, `recent_indices`): a
    store or an append, nothing more.
    """

    def __init__(
        self,
        sink: Sink,
        *,
        every: int | None = None,
        on_nonfinite: str = "warn",
        patience: int = 10,
        mode: str = "auto",
    ) -> None:
        if on_nonfinite not in ("warn", "stop"):
            raise ValueError(f"on_nonfinite must be 'warn' or 'stop', got {on_nonfinite!r}")
        self.sinks: list[Sink] = [sink]
        self.every = self.base_every = max(1, int(every or DEFAULT_EVERY))
        self.adaptive = every is None  # an explicit `every` is the user's choice: kept as given
        self._check_cost = 0.0  # smoothed seconds per sampled check (host-only reads)
        self._step_time = 0.0  # smoothed training seconds per step between checks
        self._host_read = False  # the last check read CPU tensors only
        self._check_end = time.perf_counter()
        self._full_step = 0  # the step of the last full check (gradient norms)
        self._freed_s = 0.0  # time the last check spent freeing kept losses (not its own cost)
        self.stop_on_nonfinite = on_nonfinite == "stop"
        self.patience = patience
        self.mode = mode
        self.opts: weakref.WeakKeyDictionary[Any, _OptState] = weakref.WeakKeyDictionary()
        self._by_id: dict[int, _OptState] = {}  # the per-step lookup: a dict hit, no weakref made
        self.primary: Any = None  # weakref to the optimizer whose steps number the run
        self.models: list[Any] = []  # weakrefs to models given explicitly
        # Every optimizer made while installed: a loss whose parameters none holds is a manual loop.
        self.optimizers_made: weakref.WeakSet[Any] = weakref.WeakSet()
        self.manual: ParameterUpdates | None = None  # stands in for the optimizer of a manual loop
        self._manual_decided = False
        self._zero_watches: list[GradZeroWatch] = []
        self._zero_armed = False  # within ZERO_WATCH_STEPS of the next check
        self._samplers: weakref.WeakSet[Any] = weakref.WeakSet()
        self.forward = ForwardWatch(self)
        self.clipping = ClipWatch(self)
        self.step = 0
        self.epoch = 0
        self.reported: set[str] = set()
        # Written by the hooks on every step.
        self.backwards = 0
        self.losses: list[Any] = []  # every scalar passed to backward() since the last read
        self.loss_steps: list[int] = []  # the optimizer step each of them belongs to
        self.data_wait = 0.0
        # (step, dataset indices) of the batches since the last read: the offending batch of a NaN.
        widest = self.every * (MAX_EVERY_FACTOR if self.adaptive else 1)
        self.recent_indices: deque[tuple[int, list[Any]]] = deque(maxlen=8 * (widest + 1))
        self._window_ends: list[_WindowEnd] = []  # loss windows ended since the last check
        self._unsent: list[tuple[int, float]] = []  # losses read early (an epoch's end), not yet sent
        self._window_t0 = time.perf_counter()
        self._window_step = 0
        self._epoch_loss = [0.0, 0]
        self._loss_history: deque[float] = deque(maxlen=50)  # recent finite losses, for jumps
        self._param_norm: tuple[int, float] | None = None  # (step, norm): the jump baseline
        self._names: dict[int, str] = {}
        self._closed = False
        self._adopt_next = False  # a notebook cell ended: the next optimizer to step may be a new one
        self.broken = False
        # A framework callback (Lightning, HF) reports epochs itself: no loader-based ones then.
        self.framework_epochs = False
        self.forward.open()  # the first step is always checked

    # -- events -----------------------------------------------------------------------------------
    def emit(self, event: Event) -> None:
        if event.rank is None:
            event.rank = channel.RANK
        for sink in self.sinks:
            sink(event)

    def observe(
        self, check: str, data: dict[str, Any], *, once: bool = True, step: int | None = None
    ) -> None:
        if once and check in self.reported:
            return
        self.reported.add(check)
        self.emit(GuardObservation(check=check, data=data, step=step, epoch=self.epoch))

    # -- what the user (or a framework callback) tells us --------------------------------------------
    def watch_model(self, model: nn.Module) -> None:
        self.models.append(weakref.ref(model))

    def set_primary(self, optimizer: Any) -> None:
        inner = getattr(optimizer, "optimizer", None)  # Lightning/accelerate wrappers
        target = inner if isinstance(inner, torch.optim.Optimizer) else optimizer
        self.primary = weakref.ref(target)
        self.optimizers_made.add(target)

    def roots(self) -> list[nn.Module]:
        models = [m for m in (ref() for ref in self.models) if m is not None]
        return models + [m for m in self.forward.roots if all(m is not x for x in models)]

    # -- hooks ---------------------------------------------------------------------------------------
    def on_backward(self, tensors: Any, keeps_graph: bool = False) -> None:
        """Keep the loss (a reference, no copy, no read) with the step it belongs to."""
        self.backwards += 1
        if self._zero_armed:
            for watch in self._zero_watches:
                watch.before_backward()
        if self.forward.is_open:  # a watched step: its graph's saved outputs live until backward
            self.forward.note_loss(tensors)
        if isinstance(tensors, torch.Tensor) and tensors.numel() == 1:
            # Holding the loss until the next check is free once backward freed its graph;
            # with retain_graph the graph would live on, so keep a detached copy instead.
            self.losses.append(tensors.detach() if keeps_graph else tensors)
            self.loss_steps.append(self.step + 1)
            if len(self.losses) > MAX_KEPT_LOSSES:
                self._drain_losses()

    def before_rescale(self) -> None:
        """Clipping or unscaling is about to rewrite `.grad`: first note what the loop did before it."""
        if self._zero_armed:
            for watch in self._zero_watches:
                watch.before_backward()

    def after_rescale(self) -> None:
        if self._zero_armed:
            for watch in self._zero_watches:
                watch.rescaled()

    def after_backward(self, tensors: Any) -> None:
        """Gradients are in `.grad`: in a loop without optimizer, this backward was the step."""
        if self._zero_armed:
            for watch in self._zero_watches:
                watch.after_backward()
        if self.manual is None:
            if self._manual_decided and self.backwards != IDLE_OPTIMIZER_BACKWARDS:
                return  # the per-step path of an optimizer loop: two attribute reads
            if not isinstance(tensors, torch.Tensor) or tensors.numel() != 1 or self._by_id:
                return
            self._decide_manual(tensors, idle=self._manual_decided)
            if self.manual is None:
                return
        updates = self.manual
        self._before_update(updates)
        self.on_step_post(updates)

    def _decide_manual(self, loss: Any, idle: bool = False) -> None:
        """At the first loss: does an optimizer hold its parameters, or does the loop update them?

        `idle`: an optimizer holds them but never stepped in IDLE_OPTIMIZER_BACKWARDS backward calls.
        """
        params = trained_parameters(loss)
        if not params:
            return  # no parameter behind this backward (yet): decide at the next one
        self._manual_decided = True
        if self.opts or (not idle and held_by_any(list(self.optimizers_made), params)):
            return
        self.manual = ParameterUpdates(params)
        self._new_state(self.manual)

    def _drop_manual(self) -> None:
        """An optimizer stepped after all (one made before the guard): its hooks number the steps."""
        updates, self.manual = self.manual, None
        state = self._by_id.pop(id(updates), None)
        self.opts.pop(updates, None)
        if state is not None and state.zero_watch in self._zero_watches:
            self._zero_watches.remove(state.zero_watch)
        if self.primary is not None and self.primary() is updates:
            self.primary = None

    def on_step_pre(self, optimizer: Any, args: Any, kwargs: Any) -> Any:
        state = self._by_id.get(id(optimizer))
        if state is None or state.ref() is not optimizer:
            if self.manual is not None:
                self._drop_manual()
            self._manual_decided = True
            state = self._new_state(optimizer)
        if state.pre_done:
            return None
        step = state.steps + 1
        if step % self.base_every and step != 1 and not self.stop_on_nonfinite:
            state.pre_done = True  # an unsampled step: nothing to measure before the update
            return None
        closure = kwargs.get("closure") if kwargs else None
        positional = closure is None and len(args) > 1 and callable(args[1])
        if positional:
            closure = args[1]
        if closure is None:
            self._before_update(optimizer)
            return None

        # Lightning and LBFGS run forward and backward inside step(closure): measure after it.
        def measured_closure() -> Any:
            result = closure()
            self.before_update(optimizer)
            return result

        if positional:
            return (args[0], measured_closure, *args[2:]), kwargs
        return args, {**kwargs, "closure": measured_closure}

    def on_step_post(self, optimizer: Any) -> None:
        state = self._by_id.get(id(optimizer))
        if state is None or state.ref() is not optimizer:
            return
        state.steps += 1
        state.pre_done = False
        primary = self.primary
        if primary is not None and primary() is not optimizer:
            return
        self.step = step = state.steps
        upcoming = step + 1
        # Forward hooks on every checked step at first (they find the model), then on every
        # fifth one: eval() mode can start late, but needs no fast answer to be useful.
        every = self.every
        if upcoming % every == 0 and (upcoming <= 5 * every or upcoming % (5 * every) == 0):
            self.forward.open()
        armed = (-upcoming) % every < ZERO_WATCH_STEPS
        if armed and not self._zero_armed:
            for watch in self._zero_watches:
                watch.rebase()
        self._zero_armed = armed

    def _new_state(self, optimizer: Any) -> _OptState:
        state = self.opts.get(optimizer)
        if state is None:
            state = _OptState(ref=weakref.ref(optimizer), name=type(optimizer).__name__)
            self.opts[optimizer] = state
            if self.primary is None:
                self.primary = weakref.ref(optimizer)
        self._by_id[id(optimizer)] = state
        return state

    @_never_breaks
    def before_update(self, optimizer: Any) -> None:
        """Gradients of this step are final: the optimizer is about to apply them."""
        self._before_update(optimizer)

    def _before_update(self, optimizer: Any) -> None:
        state = self._by_id.get(id(optimizer))
        if state is None or state.ref() is not optimizer:
            state = self._new_state(optimizer)
        if self._adopt_next:
            self._adopt(optimizer, state)
        if state.pre_done:
            return
        state.pre_done = True
        primary = self._is_primary(optimizer)
        step = state.steps + 1
        if step == 1 or step % self.every == 0:
            self._watch_zeroing(optimizer, state, step)
            self._check(optimizer, state, step, primary)
            return
        if primary and step % self.base_every == 0:
            self._end_window(optimizer, step)  # a point of the loss curve, read at the next check
        if primary and self.stop_on_nonfinite:
            self._check_losses_now(step)

    def _end_window(self, optimizer: Any, step: int) -> None:
        """Note where a loss window ends: a timestamp and two lookups, no tensor touched."""
        lr = optimizer.param_groups[0].get("lr")
        self._window_ends.append(
            _WindowEnd(step, time.perf_counter(), self.data_wait, _as_float(lr), self.epoch)
        )

    def on_batch(self, iterator: Any) -> None:
        """A batch came out of a DataLoader iterator (its wait is already added to `data_wait`)."""
        if iterator._num_yielded == 1:
            iterator.__dict__["_tm_start_step"] = self.step
        pending = iterator.__dict__.get("_tm_pending")
        if pending:
            index = pending.popleft()
            if type(index) is list and index and isinstance(index[0], int):
                self.recent_indices.append((self.step + 1, index))

    @_never_breaks
    def on_loader_exhausted(self, iterator: Any) -> None:
        start = iterator.__dict__.pop("_tm_start_step", None)
        if start is None or self.step <= start or self.framework_epochs:
            return  # not a training epoch (no optimizer step while it ran), or reported elsewhere
        loss = self.take_epoch_loss()
        metrics = {"loss": loss} if loss is not None else {}
        self.emit(Epoch(epoch=self.epoch, steps=self.step - start, metrics=metrics))
        self.epoch += 1

    @_never_breaks
    def take_epoch_loss(self) -> float | None:
        """Mean of every loss since the last call (one host transfer for the unchecked ones)."""
        self._drain_losses()
        total, count = self._epoch_loss
        self._epoch_loss = [0.0, 0]
        return total / count if count else None

    def _add_to_epoch(self, losses: list[tuple[int, float]]) -> None:
        if losses:
            self._epoch_loss[0] += sum(v for _, v in losses)
            self._epoch_loss[1] += len(losses)

    @_never_breaks
    def on_sampler_iter(self, sampler: Any) -> None:
        """Note the sampler's epoch at each pass; judged over the passes that trained.

        A pass during which no step was taken is no training epoch: the DDP tutorial's
        `next(iter(loader))` that reads the batch size before `set_epoch`, an evaluation
        pass. Only the epochs of training passes are compared.
        """
        passes = sampler.__dict__.setdefault("_tm_passes", [])  # [(sampler epoch, step at start)]
        if passes and passes[-1][1] == self.step:
            passes.pop()  # the previous pass took no step
        passes.append((getattr(sampler, "epoch", None), self.step))
        self._samplers.add(sampler)
        self._judge_sampler(sampler, passes[:-1])

    def _judge_sampler(self, sampler: Any, trained: list[tuple[Any, int]]) -> None:
        if len(trained) < 2 or trained[-1][0] != trained[-2][0] or not getattr(sampler, "shuffle", False):
            return
        self.observe(
            "sampler_epoch_not_set",
            {
                "iterations": len(trained),
                "epoch": trained[-1][0],
                "num_replicas": getattr(sampler, "num_replicas", None),
                "sampler_rank": getattr(sampler, "rank", None),
                "local_rank": _int_env("LOCAL_RANK"),
                "shuffle": True,
            },
        )

    def _judge_last_passes(self) -> None:
        """At the end: the last pass of each sampler counts when it took steps."""
        for sampler in list(self._samplers):
            passes = sampler.__dict__.get("_tm_passes", [])
            trained = passes if passes and passes[-1][1] < self.step else passes[:-1]
            self._judge_sampler(sampler, trained)

    @_never_breaks
    def on_scheduler_step(self, scheduler: Any) -> None:
        optimizer = getattr(scheduler, "optimizer", None)
        state = self.opts.get(optimizer) if optimizer is not None else None
        inner = getattr(optimizer, "optimizer", None)  # accelerate's AcceleratedOptimizer
        if state is None and isinstance(inner, torch.optim.Optimizer):
            state = self.opts.get(inner)
        if state is None or state.steps == 0:
            self.observe(
                "scheduler_before_optimizer",
                {
                    "scheduler": type(scheduler).__name__,
                    "optimizer": type(optimizer).__name__,
                    "optimizer_steps": 0,
                },
            )

    # -- per step ----------------------------------------------------------------------------------------
    def _is_primary(self, optimizer: Any) -> bool:
        return self.primary is None or self.primary() is optimizer

    def _watch_zeroing(self, optimizer: Any, state: _OptState, step: int) -> None:
        """Gradients only backward() touched since the last check were never zeroed (see `_zeroing`).

        Judged on sampled steps only; the watch itself costs two attribute reads per backward.
        """
        watch = state.zero_watch
        if watch is None:
            self._choose_probe(optimizer, state)
            return
        if watch.take():
            state.not_zeroed += step - state.zero_checked_step
        else:
            state.not_zeroed = 0
        state.zero_checked_step = step
        if state.not_zeroed >= self.patience:
            self.observe(
                "grads_not_zeroed",
                {
                    "steps_without_zeroing": state.not_zeroed,
                    "parameter": state.probe_name,
                    "optimizer": state.name,
                    "how": "the same gradient tensor after each step, changed only by backward()",
                },
                step=step,
            )

    def _choose_probe(self, optimizer: Any, state: _OptState) -> None:
        trainable = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]
        if trainable:
            smallest = min(trainable, key=lambda p: p.numel())
            state.zero_watch = GradZeroWatch(smallest)
            state.zero_watch.rebase()  # this step's gradient: the start of the first span
            state.probe_name = self._name(smallest)
            self._zero_watches.append(state.zero_watch)

    # -- sampled checks (host syncs happen here only) --------------------------------------------
    def _check(self, optimizer: Any, state: _OptState, step: int, primary: bool) -> None:
        state.checks += 1
        manual = isinstance(optimizer, ParameterUpdates)  # no optimizer: nothing to be missing from
        if state.checks <= 3 and not manual:  # the membership checks are settled by the 3rd checked step
            state.checked_steps.append(step)
            params = [p for g in optimizer.param_groups for p in g["params"]]
            missing = {id(p) for p in params if p.requires_grad and p.grad is None}
            state.never_grad = missing if state.never_grad is None else state.never_grad & missing
            if state.checks == 1:
                self._first_check(optimizer)
            if state.checks == 3:
                self._check_membership(optimizer, state, step)
        elif state.checks == 1:
            self._first_check(optimizer)
        if primary:
            started = time.perf_counter()
            window = started - self._check_end  # training time since the last check ended
            steps = max(1, step - self._full_step)
            if self.forward.is_open:  # the losses' graphs are read only for a watched forward pass
                self.forward.close(step, self._losses_of(step))
            self._flush(optimizer, step)
            self._check_end, self._full_step = time.perf_counter(), step
            if self.adaptive and self._host_read and not self.stop_on_nonfinite:
                cost = self._check_end - started - self._freed_s
                self._keep_to_budget(state.checks, step, cost, window / steps)

    def _keep_to_budget(self, checks: int, step: int, cost: float, step_time: float) -> None:
        """Widen (or narrow back) `every` so that full checks cost at most CHECK_BUDGET."""
        smooth = 0.2
        if checks <= 2:  # the first checks pay one-off costs (names, first-check observations)
            return
        self._check_cost = cost if not self._check_cost else (1 - smooth) * self._check_cost + smooth * cost
        self._step_time = (
            step_time if not self._step_time else (1 - smooth) * self._step_time + smooth * step_time
        )
        if checks < WARMUP_CHECKS or self._step_time <= 0:
            return
        base = self.base_every
        needed = self._check_cost / (CHECK_BUDGET * self._step_time)  # steps per check
        every = min(base * MAX_EVERY_FACTOR, max(base, base * math.ceil(needed / base)))
        # Widen at once; narrow only when clearly over-budgeted, so noise does not flap it.
        if every == self.every or (every < self.every and needed > self.every / 2):
            return
        self.every = every
        self.observe(
            "sampling",
            {
                "every": every,
                "base_every": base,
                "from_step": step,
                "check_us": round(self._check_cost * 1e6, 1),
                "step_us": round(self._step_time * 1e6, 1),
                "budget": CHECK_BUDGET,
            },
            once=False,
            step=step,
        )

    def _first_check(self, optimizer: Any) -> None:
        self.observe(
            "torch_guard",
            {
                "every": self.every,
                "on_nonfinite": "stop" if self.stop_on_nonfinite else "warn",
                "mode": self.mode,
                "steps": "backward" if isinstance(optimizer, ParameterUpdates) else "optimizer",
                "local_rank": _int_env("LOCAL_RANK"),
                "world_size": _int_env("WORLD_SIZE"),
                "group_rank": _int_env("GROUP_RANK"),
            },
        )
        seed = torch.initial_seed()
        if seed >= 2**32:  # torch seeds itself with a random 64-bit value; people pick small ones
            self.observe("unseeded", {"initial_seed": seed})
        decayed = [
            (self._name(p), group["weight_decay"])
            for group in optimizer.param_groups
            if group.get("weight_decay", 0)
            for p in group["params"]
            if p.requires_grad and p.dim() <= 1
        ]
        if decayed:
            self.observe(
                "decay_on_norm_bias",
                {
                    "weight_decay": decayed[0][1],
                    "count": len(decayed),
                    "params": [name for name, _ in decayed][:20],
                    "optimizer": type(optimizer).__name__,
                },
            )

    def _check_membership(self, optimizer: Any, state: _OptState, step: int) -> None:
        if state.never_grad:
            names = [self._name_of_id(optimizer, pid) for pid in sorted(state.never_grad)]
            self.observe(
                "params_without_grad",
                {"count": len(names), "params": names[:20], "checked_steps": list(state.checked_steps)},
                step=step,
            )
        held = {id(p) for opt in list(self.opts.keys()) for g in opt.param_groups for p in g["params"]}
        seen: set[int] = set()
        missing: list[tuple[str, int]] = []
        for root in self.roots():
            for name, p in root.named_parameters():
                if p.requires_grad and id(p) not in held and id(p) not in seen:
                    missing.append((name, p.numel()))
                seen.add(id(p))
        if missing:
            self.observe(
                "params_not_in_optimizer",
                {
                    "count": len(missing),
                    "numel": sum(n for _, n in missing),
                    "params": [name for name, _ in missing][:20],
                    "optimizer_tensors": len(held),
                },
                step=step,
            )

    def _flush(self, optimizer: Any, step: int) -> None:
        """One host read: the losses kept since the last check and this step's gradient norms."""
        grads, params = [], []
        for group in optimizer.param_groups:
            for p in group["params"]:
                grad = p.grad
                if grad is not None and not grad.is_sparse:
                    grads.append(grad)
                    params.append(p)
        losses, loss_steps = self._take_losses()
        clips = self.clipping.take()  # pre-clip norms since the last read: read in the same transfer
        self._host_read = all(t.is_cpu for t in grads) and all(t.is_cpu for t in losses)
        with torch.no_grad():
            values = _floats([*clips.tensors, *losses, *_norms(grads)])
        self.clipping.report(clips, values[: len(clips.tensors)])
        values = values[len(clips.tensors) :]
        freeing = time.perf_counter()
        # The graphs' nodes they hold go now, not at the next window: work a bare loop does at
        # every step anyway (when its loss dies), so it is not counted as the check's cost.
        del losses
        self._freed_s = time.perf_counter() - freeing
        loss_values = list(zip(loss_steps, values[: len(loss_steps)], strict=True))
        norms = values[len(loss_steps) :]
        self._check_nonfinite(loss_values, step)
        self.recent_indices.clear()  # every batch so far had its loss read: none can be the culprit
        self._watch_updates(optimizer, loss_values, step)
        self._add_to_epoch(loss_values)
        last: dict[str, float] = {}
        if norms:
            last["grad_norm"] = math.sqrt(sum(n * n for n in norms))
            self._observe_norms(params, norms, step)
        self._send_windows(optimizer, step, [*self._unsent, *loss_values], last)

    def _send_windows(
        self, optimizer: Any, step: int, losses: list[tuple[int, float]], last: dict[str, float]
    ) -> None:
        """One `Step` event per loss window since the last check, the last one ending at `step`."""
        now = time.perf_counter()
        ends = self._window_ends
        if ends and ends[-1].step == step:
            final = ends.pop()
        else:
            lr = _as_float(optimizer.param_groups[0].get("lr"))
            final = _WindowEnd(step, now, self.data_wait, lr, self.epoch)
        begin_step, begin_time, begin_wait = self._window_step, self._window_t0, 0.0
        taken = 0  # `losses` are in step order: those read early first, then this check's
        for end in [*ends, final]:
            window: list[float] = []
            while taken < len(losses) and (end is final or losses[taken][0] <= end.step):
                window.append(losses[taken][1])
                taken += 1
            metrics = {"loss": sum(window) / len(window)} if window else {}
            if end is final:
                metrics.update(last)
            if end.lr is not None:
                metrics["lr"] = end.lr
            steps = max(1, end.step - begin_step)
            self.emit(
                Step(
                    step=end.step,
                    epoch=end.epoch,
                    metrics=metrics,
                    duration_s=(end.time - begin_time) / steps,
                    data_wait_s=(end.data_wait - begin_wait) / steps,
                )
            )
            begin_step, begin_time, begin_wait = end.step, end.time, end.data_wait
        self._window_ends, self._unsent = [], []
        self._window_t0, self._window_step, self.data_wait = final.time, step, 0.0

    def _observe_norms(self, params: list[Any], norms: list[float], step: int) -> None:
        weights = [(n, p) for n, p in zip(norms, params, strict=True) if p.dim() >= 2 and math.isfinite(n)]
        if len(weights) < 2:
            return
        low = min(weights, key=lambda w: w[0])
        high = max(weights, key=lambda w: w[0])
        self.emit(
            GuardObservation(
                check="grad_norms",
                step=step,
                epoch=self.epoch,
                data={
                    "min": low[0],
                    "min_param": self._name(low[1]),
                    "max": high[0],
                    "max_param": self._name(high[1]),
                    "every": self.every,
                },
            )
        )

    # -- an update that blew up between two samples ---------------------------------------------------
    def _watch_updates(self, optimizer: Any, losses: list[tuple[int, float]], step: int) -> None:
        """Catch a one-step gradient explosion that fell between two sampled gradient norms.

        What the window keeps anyway tells it: the first loss that turned non-finite or
        jumped to `JUMP_FACTOR` x the recent median, and a parameter norm that is non-finite
        or `JUMP_FACTOR` x its last baseline (measured every `PARAM_NORM_EVERY`-th sample, so
        a healthy run pays one norm per 50 steps). A bad batch alone moves the loss, not the
        weights; a NaN in the data turns the loss non-finite at the step it entered.
        """
        if not self._is_primary(optimizer) or "update_explosion" in self.reported:
            return
        history = self._loss_history
        typical = median(history) if len(history) >= JUMP_MIN_HISTORY else None
        jump: tuple[int, float, float | None] | None = None
        for loss_step, value in losses:
            jumped = typical is not None and typical > 0 and value > JUMP_FACTOR * typical
            if jumped or not math.isfinite(value):
                jump = (loss_step, value, typical)
                break
        history.extend(value for _, value in losses if math.isfinite(value))
        state = self._by_id.get(id(optimizer))
        checks = state.checks if state is not None else 1
        if jump is None:
            if self._param_norm is None or checks % PARAM_NORM_EVERY == 0:
                self._param_norm = (step, self._parameter_norm(optimizer))
            return
        if self._param_norm is None:
            return  # nothing to compare with: the jump came before any baseline
        norm = self._parameter_norm(optimizer)
        base_step, base = self._param_norm
        if math.isfinite(norm) and not (base > 0 and norm > JUMP_FACTOR * base):
            return
        loss_step, value, typical = jump
        self.observe(
            "update_explosion",
            {
                "step": loss_step,
                "loss": value,
                "loss_median_before": typical,
                "param_norm": norm,
                "param_norm_before": base,
                "param_norm_step": base_step,
                "checked_step": step,
                "every": self.every,
            },
            step=loss_step,
        )

    def _parameter_norm(self, optimizer: Any) -> float:
        params = [p for g in optimizer.param_groups for p in g["params"] if not p.is_sparse]
        with torch.no_grad():
            return math.sqrt(sum(n * n for n in _floats(_norms(params))))

    # -- non-finite loss ---------------------------------------------------------------------------------
    def _take_losses(self) -> tuple[list[Any], list[int]]:
        losses, steps = self.losses, self.loss_steps
        self.losses, self.loss_steps = [], []
        return losses, steps

    def _losses_of(self, step: int) -> list[Any]:
        return [t for t, s in zip(self.losses, self.loss_steps, strict=True) if s == step]

    def _drain_losses(self) -> list[tuple[int, float]]:
        losses, steps = self._take_losses()
        if not losses:
            return []
        with torch.no_grad():
            pairs = list(zip(steps, _floats(losses), strict=True))
        self._add_to_epoch(pairs)
        self._unsent.extend(pairs)  # sent with the next check's windows
        del self._unsent[:-MAX_KEPT_LOSSES]  # backward without optimizer steps: no window to send
        self._check_nonfinite(pairs, self.step)
        return pairs

    def _check_losses_now(self, step: int) -> None:
        """`on_nonfinite="stop"`: this step's losses, read before the update (one read per step)."""
        current = self._losses_of(step)
        if not current:
            return
        with torch.no_grad():
            finite = all(math.isfinite(v) for v in _floats(current))
        if not finite:
            self._drain_losses()

    def _check_nonfinite(self, losses: list[tuple[int, float]], step: int) -> None:
        bad = [(s, v) for s, v in losses if not math.isfinite(v)]
        if not bad or "nonfinite_loss" in self.reported:
            return
        self.reported.add("nonfinite_loss")
        first_step, value = bad[0]
        finite_before = [v for s, v in losses if s < first_step and math.isfinite(v)]
        batches = [index for s, index in self.recent_indices if s == first_step]
        evidence: dict[str, Any] = {
            "step": first_step,
            "loss": value,
            "last_finite_loss": finite_before[-1] if finite_before else None,
            "epoch": self.epoch,
            "checked": "every step"
            if self.stop_on_nonfinite
            else (
                f"every {self.every} steps (all losses kept, reported at most {self.every - 1} steps late)"
            ),
        }
        if batches:
            evidence["batch_indices"] = [i for batch in batches for i in batch][:1024]
        stopping = self.stop_on_nonfinite
        message = f"Loss became {value} at step {first_step} (epoch {self.epoch})"
        finding = NONFINITE_LOSS.finding(
            message + (": stopped before the update" if stopping else ""),
            evidence=evidence,
            step=first_step,
            epoch=self.epoch,
            rank=channel.RANK,
        )
        self.emit(FindingRaised(finding=finding.to_dict()))
        if stopping:
            raise NonFiniteLossError(
                f"trainmedic: {message}; stopped before the optimizer applied it (on_nonfinite='stop')",
                finding.to_dict(),
            )

    # -- names -------------------------------------------------------------------------------------------
    def _name(self, param: Any) -> str:
        if id(param) not in self._names:
            for root in self.roots():
                for name, p in root.named_parameters():
                    self._names.setdefault(id(p), name)
        return self._names.get(id(param), f"<{tuple(param.shape)} tensor>")

    def _name_of_id(self, optimizer: Any, pid: int) -> str:
        for group in optimizer.param_groups:
            for p in group["params"]:
                if id(p) == pid:
                    return self._name(p)
        return "<parameter>"

    @_never_breaks
    def settle(self) -> None:
        """A notebook cell ended. Send its last window and check the losses kept since the last
        check now (they would otherwise wait for the next cell's training, or the kernel's
        exit, and be counted in the next training's first window), and let the first optimizer to
        step next become the primary: a later cell often trains a new model with a new one."""
        if self._closed:
            return
        primary = self.primary() if self.primary is not None else None
        state = self.opts.get(primary) if primary is not None else None
        step = self.step + (1 if state is not None and state.pre_done else 0)
        if primary is not None and state is not None and step > self._window_step:
            with _quiet():
                self._flush(primary, step)  # the cell's last window, as `close` sends it at exit
        else:
            self._drain_losses()
        self._adopt_next = True

    def _adopt(self, optimizer: Any, state: _OptState) -> None:
        """The first optimizer to step after a cell: a new one is a new training. It numbers the
        steps on from the last (the loss curve and the windows stay in order), and the baselines
        of the last training (loss history, parameter norm) and its one-off reports are reset."""
        self._adopt_next = False
        if self._is_primary(optimizer):
            return
        self.primary = weakref.ref(optimizer)
        state.steps = self.step
        self._loss_history.clear()
        self._param_norm = None
        self._epoch_loss = [0.0, 0]
        self.reported -= {"nonfinite_loss", "update_explosion"}

    @_never_breaks
    def close(self) -> None:
        """End of the process or of the guard: send what the last window measured."""
        if self._closed:
            return
        self._closed = True
        self.forward.close(None)
        self._judge_last_passes()
        primary = self.primary() if self.primary is not None else None
        state = self.opts.get(primary) if primary is not None else None
        step = self.step + (1 if state is not None and state.pre_done else 0)
        if primary is not None and state is not None and step > self._window_step:
            with _quiet():
                self._flush(primary, step)
            if state.checks < 3 and not isinstance(primary, ParameterUpdates):
                self._check_membership(primary, state, self.step)
        self.clipping.read_rest()  # clip calls no read took (the optimizer was freed first)


def _norms(tensors: list[Any]) -> list[Any]:
    if not tensors:
        return []
    try:
        return list(torch._foreach_norm(tensors))
    except (RuntimeError, TypeError):  # mixed devices/dtypes on old torch
        return [torch.linalg.vector_norm(t) for t in tensors]


def _floats(tensors: list[Any]) -> list[float]:
    """Single-element tensors as floats, in one host read.

    On the CPU `.item()` is no sync and the cheapest read (a stack and `tolist` cost more);
    anywhere else one `stack` then one `tolist` make it a single transfer.
    """
    if not tensors:
        return []
    if all(t.is_cpu for t in tensors):
        return [float(t.item()) for t in tensors]
    device = next(t.device for t in tensors if not t.is_cpu)
    try:
        return [float(v) for v in torch.stack(tensors).reshape(-1).tolist()]
    except (RuntimeError, TypeError):  # mixed shapes ((), (1,)), dtypes or devices
        return torch.stack([t.detach().reshape(()).float().to(device) for t in tensors]).tolist()


def _as_float(value: Any) -> float | None:
    """A learning rate as a float (None when it is a tensor or missing)."""
    return float(value) if isinstance(value, (int, float)) else None


def _int_env(name: str) -> int | None:
    value = os.environ.get(name, "")
    return int(value) if value.isdigit() else None


class _quiet:
    """At exit a non-finite loss is reported, never raised."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: object, tb: object) -> bool:
        return isinstance(exc, NonFiniteLossError)
