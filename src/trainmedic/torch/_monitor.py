"""What the PyTorch guard measures, step by step, and the events it sends.

One `Monitor` per process is fed by the hooks of `_patches`. It measures and
reports facts (`GuardObservation`, `Step`, `Epoch`); the rules in
`trainmedic.rules.tor` and `trainmedic.rules.trn` decide what they mean.
The exception is a non-finite loss, which is raised here (TRN001's `judge_guard`), so that
`on_nonfinite="stop"` can stop the run before the update.

Cost: every step only stores the loss and integers (its step, the DataLoader
wait): the loss's value on the CPU, where reading it is no sync, and a detached
alias elsewhere (`_reads.kept`); no kernel, no host sync, no event, and three
Python calls on most steps: PyTorch calls the monitor's `on_step_post` itself,
and the backward and DataLoader wrappers of `_patches` do an ordinary step's work
inline (`plain_backward` says when that is all a backward needs). PyTorch calls
`on_step_pre` only on the steps that need it (a checked step, and the steps that arm
the zeroing watch before it): with one optimizer, `on_step_post` switches it off for
the quiet stretches in between (`_stepplan`), and counts their steps on its shortest
path; the end of a loss window within a stretch is noted after its update.
Anything else that needs a tensor op or a host sync (reading an accelerator's
losses, gradient norms, the inputs of the loss, finiteness) runs on sampled
steps only, every `every` steps, in one batched read. The trade-offs that follow, and how each is made up
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
(a `Step` event with the window's mean loss, timing and data wait, and the record of every
loss of the window, `Step.window`: count, range, the step of the highest, non-finite count;
computed at the check from what it reads, so a spike between two points is seen at no cost to
an ordinary step): on the steps in between that end a window, the post-step hook only notes
the time, the data wait and the learning rate. The reads and the gradient norms happen together on
checked steps, every `every` steps, and keep to a budget: after `WARMUP_CHECKS`
checks at the base rate, when the tensors are on the CPU (where a check's time
is all its own, not a wait for queued device work), the monitor times its
checks against the training time between them and widens `every` (in multiples
of the base, up to `MAX_EVERY_FACTOR` times it) until they cost at most
`CHECK_BUDGET` of the step time. On a tiny model on a CPU, whose steps are not
much longer than a check, the gradient norms are then measured, and the
kept losses judged, every 20-100 steps instead of 10 (the curve keeps its 10-step points;
a NaN is reported later but still at its own step); a `sampling` observation
says when and why, and the findings' evidence gives the rate. An `every` given
explicitly is kept as it is.

The facade `Monitor` keeps what the hooks touch on every step; the rest is in its
parts: `_checks` (the sampled reads), `_closures` (where a sampled step is measured:
before the update, or after `step(closure)`), `_budget` (the rate), `_curve` (Step and
Epoch events), `_epochs` (the loaders' passes, the known epoch), `_losses` (reading the
kept losses; the non-finite loss), `_scaler` (a gradient scaler's skipped steps),
`_explosion` (updates that blew up), `_hygiene` (how the loop trains), `_stepplan` (what the
next steps' hooks do), `_outbox` (the events sent), `_forward` and `_clipping` (forward hooks
and clipping), `_names` (parameter names).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from trainmedic.torch._batches import LoaderBatches
from trainmedic.torch._budget import DEFAULT_EVERY, CheckBudget
from trainmedic.torch._checks import SampledChecks
from trainmedic.torch._clipping import ClipWatch
from trainmedic.torch._closures import ClosureSteps
from trainmedic.torch._curve import LossCurve
from trainmedic.torch._endings import Endings
from trainmedic.torch._epochs import Epochs
from trainmedic.torch._explosion import UpdateWatch
from trainmedic.torch._forward import ForwardWatch
from trainmedic.torch._hygiene import LoopHygiene
from trainmedic.torch._interface import OptState, Sink, Watcher
from trainmedic.torch._losses import MAX_KEPT_LOSSES, LossReads
from trainmedic.torch._manual import ParameterUpdates
from trainmedic.torch._names import ParamNames
from trainmedic.torch._optimizers import Optimizers
from trainmedic.torch._outbox import Outbox
from trainmedic.torch._reads import kept
from trainmedic.torch._safety import NonFiniteLossError, turn_off
from trainmedic.torch._scaler import ScalerWatch
from trainmedic.torch._stepplan import StepPlan, no_hook
from trainmedic.torch._zeroing import GradZeroWatch

__all__ = ["Monitor", "NonFiniteLossError"]

# An optimizer holds the loss's parameters but has not stepped after this many backward calls:
# no accumulation is that long, so the loop updates them itself and backward() is its step.
IDLE_OPTIMIZER_BACKWARDS = 256


class Monitor:
    """Measures one process's PyTorch training through global hooks (`MonitorLike`).

    The attributes the hooks of `_patches` read or write on every step are plain
    ones (`plain_backward`, `losses`, `loss_steps`, `step`, `data_wait`, `broken`):
    a read, a store or an append, nothing more.
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
        self.reported: set[str] = set()  # the checks observed (`_outbox`)
        self.every = self.base_every = max(1, int(every or DEFAULT_EVERY))
        self.adaptive = every is None  # an explicit `every` is the user's choice: kept as given
        self.stop_on_nonfinite = on_nonfinite == "stop"
        self.patience = patience
        self.mode = mode
        self.primary: Any = None  # weakref to the optimizer whose steps number the run
        self.models: list[Any] = []  # weakrefs to models given explicitly
        self.manual: ParameterUpdates | None = None  # stands in for the optimizer of a manual loop
        self.manual_decided = False
        self._zero_watches: list[GradZeroWatch] = []
        self.optimizers = Optimizers(self, self._zero_watches)
        self.opts, self._by_id = self.optimizers.opts, self.optimizers.by_id  # the same dicts
        self.optimizers_made = self.optimizers.made
        self._zero_armed = False  # within ZERO_WATCH_STEPS of the next check
        self.step = 0
        self.epoch = 0
        self.backwards = 0  # this and the four below: written by the hooks on every step
        self.losses: list[Any] = []  # every scalar passed to backward() since the last read
        self.loss_steps: list[int] = []  # the optimizer step each of them belongs to
        self.data_wait = 0.0
        # The dataset indices of the batches since the last read: the offending batch of a NaN.
        self.batches = LoaderBatches()
        # plain: the backward hook only keeps the loss (no watch armed, no forward pass watched);
        # quiet_until: the post-step hook only counts steps below it (`on_step_post`).
        self.plain_backward, self.quiet_until = False, 0
        # The only optimizer's state while it is in a quiet stretch (`on_step_post`).
        self._quiet: OptState | None = None
        # Switches the optimizer pre-step hook off and on (`_patches.PreStepHook`; none until installed).
        self.pre_step: Callable[[bool], None] = no_hook
        self.pre_step_on = True
        self.adopt_next = False  # a notebook cell ended: the next optimizer to step may be a new one
        self.broken = False
        self.framework_epochs, self.loaders_seen = False, False  # where epochs come from (`_epochs`)
        self.watchers: list[Watcher] = []  # checks other packages add (`trainmedic.llm`)
        self._assemble()

    def _assemble(self) -> None:
        """The parts, one concern each, and the hooks and per-step calls they answer, bound once:
        a call costs what a method's did."""
        outbox = Outbox(self)
        self.emit, self.observe = outbox.emit, outbox.observe
        self.forward = ForwardWatch(self)
        self.clipping = ClipWatch(self)
        self.names = ParamNames(self.roots)
        self.scaler = ScalerWatch(self, self.names)
        self.budget = CheckBudget(self)
        self.reads = LossReads(self)
        self.curve = LossCurve(self, self.reads)
        self.updates = UpdateWatch(self)
        self.hygiene = LoopHygiene(self, self.names, self._zero_watches)
        self.checks = SampledChecks(
            self,
            forward=self.forward,
            clipping=self.clipping,
            budget=self.budget,
            reads=self.reads,
            curve=self.curve,
            updates=self.updates,
            hygiene=self.hygiene,
            names=self.names,
        )
        self.endings = Endings(self, self.checks)
        epochs = Epochs(self, self.batches, self.curve)
        self.known_epoch = epochs.known_epoch
        self.on_loader_start, self.on_loader_exhausted = epochs.on_loader_start, epochs.on_loader_exhausted
        self._sampled_step_pre = ClosureSteps(self, self._before_update).sampled_step_pre
        self.on_sampler_iter = self.hygiene.on_sampler_iter
        self.on_scheduler_step = self.hygiene.on_scheduler_step
        self.take_epoch_loss = self.reads.take_epoch_loss
        plan = StepPlan(self, self._zero_watches)
        self._count, self._plan, self.wake = plan.count, plan.plan, plan.wake
        # A cell ended, or the primary was named: the next step takes the full hooks.
        self.settle = plan.then_wake(self.reads.after_targets(self.endings.settle))
        self.close = self.reads.after_targets(self.endings.close)
        self.set_primary = plan.then_wake(self.optimizers.set_primary)
        self._new_state = self.optimizers.new_state
        self._decide_manual, self._drop_manual = self.optimizers.decide_manual, self.optimizers.drop_manual
        self._check_losses_now = self.reads.check_now
        self.forward.open()  # the first step is always checked

    # -- what the user (or a framework callback) tells us --------------------------------------------
    def watch_model(self, model: nn.Module) -> None:
        self.models.append(weakref.ref(model))

    def roots(self) -> list[nn.Module]:
        models = [m for m in (ref() for ref in self.models) if m is not None]
        return models + [m for m in self.forward.roots if all(m is not x for x in models)]

    def is_primary(self, optimizer: Any) -> bool:
        return self.primary is None or self.primary() is optimizer

    def state_of(self, optimizer: Any) -> OptState | None:
        return self._by_id.get(id(optimizer))

    # -- hooks ---------------------------------------------------------------------------------------
    def on_backward(self, tensors: Any, keeps_graph: bool = False) -> None:
        """Keep the loss (a reference, no copy, no read) with the step it belongs to."""
        self.backwards += 1
        if self._zero_armed:
            for watch in self._zero_watches:
                watch.before_backward()
        if self.forward.is_open:  # a watched step: its graph's saved outputs live until backward
            self.forward.note_loss(tensors)
            self.reads.targets.note(tensors, self.step + 1)  # a regression's yardstick
        elif (self.step + 1) % self.every == 0:  # a checked step: the yardstick too
            self.reads.targets.note(tensors, self.step + 1)
        if isinstance(tensors, torch.Tensor) and tensors.numel() == 1:
            # Its value or a detached alias (`kept`, which says why), not the loss; only a watched
            # step keeps its graph (read at the check), never with retain_graph (it would live on).
            keep_graph = self.forward.is_open and not keeps_graph
            self.losses.append(tensors if keep_graph else kept(tensors))
            self.loss_steps.append(self.step + 1)
            if len(self.losses) > MAX_KEPT_LOSSES:
                self.reads.drain()

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
            if self.manual_decided and self.backwards != IDLE_OPTIMIZER_BACKWARDS:
                return  # the per-step path of an optimizer loop: two attribute reads
            if not isinstance(tensors, torch.Tensor) or tensors.numel() != 1 or self._by_id:
                return
            self._decide_manual(tensors, idle=self.manual_decided)
            if self.manual is None:
                return
        updates = self.manual
        self._before_update(updates)
        self.on_step_post(updates, (), {})

    def on_step_pre(self, optimizer: Any, args: Any, kwargs: Any) -> Any:
        """PyTorch's optimizer step pre-hook (called by PyTorch itself: one call per step)."""
        if self.broken:
            return None
        try:
            state = self._by_id.get(id(optimizer))
            if state is None or state.ref() is not optimizer:
                if self.manual is not None:
                    self._drop_manual()
                self.manual_decided = True
                state = self._new_state(optimizer)
            if state.pre_done:
                return None
            step = state.steps + 1
            if step % self.every and step != 1 and not self.stop_on_nonfinite:
                state.pre_done = True  # an unchecked step: nothing to measure before the update
                return None
            return self._sampled_step_pre(optimizer, args, kwargs)
        except Exception as exc:
            turn_off(self, "on_step_pre", exc)
            return None

    def on_step_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        """PyTorch's optimizer step post-hook; also the end of a manual loop's step.

        Every step of the run passes here, so its short path is the one most steps take: a step
        of the only optimizer in a quiet stretch (`_stepplan`) is counted and nothing else.
        """
        if self.broken:
            return
        try:
            state = self._quiet
            if state is not None and state.ref() is optimizer:
                # No pre-step hook ran (it is off), and this is the primary (`set_primary` wakes).
                state.steps += 1
                self.step = step = state.steps
            else:
                counted = self._count(optimizer, args, kwargs)
                if counted is None:
                    return
                state, step = counted, self.step
            if step < self.quiet_until:
                return  # nothing to arm or open until the next check draws near (`_stepplan`)
            self._plan(state, step)
        except Exception as exc:
            turn_off(self, "on_step_post", exc)

    def _before_update(self, optimizer: Any) -> None:
        """Gradients of this step are final: the optimizer is about to apply them."""
        state = self._by_id.get(id(optimizer))
        if state is None or state.ref() is not optimizer:
            state = self._new_state(optimizer)
        if self.adopt_next:
            self.endings.adopt(optimizer, state)
        if state.pre_done:
            return
        state.pre_done = True
        primary = self.is_primary(optimizer)
        step = state.steps + 1
        if step == 1 or step % self.every == 0:
            self.hygiene.watch_zeroing(optimizer, state, step)
            self.checks.check(optimizer, state, step, primary)
            return
        # (A window that ends on an unchecked step is noted after its update: `StepPlan.plan`.)
        if primary and self.stop_on_nonfinite:
            self._check_losses_now(step)
