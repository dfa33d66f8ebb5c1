"""Loop hygiene: what the training loop itself does wrong, seen from the outside.

Gradients never zeroed (TOR003), a DistributedSampler whose epoch is never set, a
scheduler stepped before its optimizer, parameters that never get a gradient or
that no optimizer holds; at the first checked step, weight decay on norms and biases and an
unseeded run (`_setup`). (A model left in eval() mode is told by the forward hooks, `_forward`.) Each is a
`GuardObservation` named by the finding's file in `trainmedic.rules.tor`, whose
rules word it (and whose thresholds decide the sampler's and the seed's case here).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import torch
from trainmedic.rules.tor import tor001_frozen_parameters as tor001
from trainmedic.rules.tor import tor003_grads_not_zeroed as tor003
from trainmedic.rules.tor import tor005_sampler_epoch_not_set as tor005
from trainmedic.rules.tor import tor006_scheduler_before_optimizer as tor006
from trainmedic.rules.trn import trn012_zero_learning_rate as trn012
from trainmedic.torch import _setup as setup
from trainmedic.torch._epochs import PASS_LOG_ATTR
from trainmedic.torch._reads import as_float, int_env
from trainmedic.torch._safety import part_never_breaks
from trainmedic.torch._zeroing import GradZeroWatch

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike, OptState
    from trainmedic.torch._names import ParamNames


def trained(sampler_pass: tuple[Any, int, Any], until: int) -> bool:
    """Whether optimizer steps were taken during a sampler's pass: from its start to its loader's
    last batch or end (its log's latest pull, for the step after it), else to `until`."""
    _, start, log = sampler_pass
    end = log.latest() - 1 if log is not None and log.latest() else until
    return end > start


class LoopHygiene:
    """The checks of how the loop trains: on sampled steps, sampler passes and scheduler steps."""

    def __init__(self, monitor: MonitorLike, names: ParamNames, zero_watches: list[GradZeroWatch]) -> None:
        self.monitor = monitor
        self.names = names
        self.zero_watches = zero_watches  # the monitor's list: its hooks feed every watch in it
        self.samplers: weakref.WeakSet[Any] = weakref.WeakSet()

    @part_never_breaks
    def on_sampler_iter(self, sampler: Any) -> None:
        """Note the sampler's epoch at each pass; judged over the passes that trained.

        A pass trained when optimizer steps were taken while it yielded its batches: between
        its start and its last batch, or the pull that found it empty (the log of the loader's
        pass, `_batches.BatchLog.latest`). A pass of a sampler iterated outside a DataLoader ends
        where its next pass starts. A pass without steps is no training epoch, whatever the
        steps around it: an evaluation loader's pass (run to its end or cut short), the DDP
        tutorial's `next(iter(loader))` that reads the batch size before `set_epoch`. Its
        epoch order does not matter and is not judged: only the passes that trained are compared.
        """
        step = self.monitor.step
        passes = sampler.__dict__.setdefault("_tm_passes", [])  # [(sampler epoch, start step, log)]
        if passes and trained(passes[-1], step):
            passes[-1] = (*passes[-1][:2], None)  # settled: its loader's log can go
        elif passes:
            passes.pop()
        log = sampler.__dict__.pop(PASS_LOG_ATTR, None)
        passes.append((getattr(sampler, "epoch", None), step, log))
        self.samplers.add(sampler)
        self.judge_sampler(sampler, passes[:-1])

    def judge_sampler(self, sampler: Any, training_passes: list[tuple[Any, int, Any]]) -> None:
        epochs = [epoch for epoch, _, _ in training_passes]  # the sampler's epoch at each of them
        if not tor005.epoch_not_set(epochs, bool(getattr(sampler, "shuffle", False))):
            return
        self.monitor.observe(
            tor005.OBSERVATION,
            {
                "iterations": len(training_passes),
                "epoch": training_passes[-1][0],
                "num_replicas": getattr(sampler, "num_replicas", None),
                "sampler_rank": getattr(sampler, "rank", None),
                "local_rank": int_env("LOCAL_RANK"),
                "shuffle": True,
            },
        )

    def judge_last_passes(self) -> None:
        """At the end: the last pass of each sampler counts when it took steps."""
        for sampler in list(self.samplers):
            passes = sampler.__dict__.get("_tm_passes", [])
            last_trained = bool(passes) and trained(passes[-1], self.monitor.step)
            self.judge_sampler(sampler, passes if last_trained else passes[:-1])

    @part_never_breaks
    def on_scheduler_step(self, scheduler: Any) -> None:
        opts = self.monitor.opts
        optimizer = getattr(scheduler, "optimizer", None)
        state = opts.get(optimizer) if optimizer is not None else None
        inner = getattr(optimizer, "optimizer", None)  # accelerate's AcceleratedOptimizer
        if state is None and isinstance(inner, torch.optim.Optimizer):
            state = opts.get(inner)
        if state is None or state.steps == 0:
            self.monitor.observe(
                tor006.OBSERVATION,
                {
                    "scheduler": type(scheduler).__name__,
                    "optimizer": type(optimizer).__name__,
                    "optimizer_steps": 0,
                },
            )
        elif type(scheduler) not in state.scheduler_kinds:  # one set lookup a scheduler step
            self.note_schedule(scheduler, optimizer, state)

    def note_schedule(self, scheduler: Any, optimizer: Any, state: OptState) -> None:
        """A kind of scheduler steps this optimizer for the first time: its class and the base
        learning rate (TRN012's reference; ReduceLROnPlateau sets none)."""
        state.scheduler_kinds.add(type(scheduler))
        groups = getattr(optimizer, "param_groups", None) or [{}]
        base = groups[0].get("initial_lr")
        self.monitor.observe(
            trn012.OBSERVATION,
            {
                "scheduler": type(scheduler).__name__,
                "optimizer": type(optimizer).__name__,
                "base_lr": as_float(base) if base is not None else None,
            },
            once=False,
            step=state.steps,
        )

    def watch_zeroing(self, optimizer: Any, state: OptState, step: int) -> None:
        """Gradients only backward() touched since the last check were never zeroed (see `_zeroing`).

        Judged on sampled steps only; the watch itself costs two attribute reads per backward.
        """
        watch = state.zero_watch
        if watch is None:
            self.choose_probe(optimizer, state)
            return
        if watch.take():
            state.not_zeroed += step - state.zero_checked_step
        else:
            state.not_zeroed = 0
        state.zero_checked_step = step
        if state.not_zeroed >= self.monitor.patience:
            self.monitor.observe(
                tor003.OBSERVATION,
                {
                    "steps_without_zeroing": state.not_zeroed,
                    "parameter": state.probe_name,
                    "optimizer": state.name,
                    "how": "the same gradient tensor after each step, changed only by backward()",
                },
                step=step,
            )

    def choose_probe(self, optimizer: Any, state: OptState) -> None:
        trainable = [p for g in optimizer.param_groups for p in g["params"] if p.requires_grad]
        if trainable:
            smallest = min(trainable, key=lambda p: p.numel())
            state.zero_watch = GradZeroWatch(smallest)
            state.zero_watch.rebase()  # this step's gradient: the start of the first span
            state.probe_name = self.names.name(smallest)
            self.zero_watches.append(state.zero_watch)

    def first_check(self, optimizer: Any) -> None:
        """At the first checked step: how the guard runs, the seed and the decayed norms (`_setup`)."""
        setup.observe_setup(self.monitor, self.names, optimizer)

    def check_membership(self, optimizer: Any, state: OptState, step: int) -> None:
        monitor = self.monitor
        if state.never_grad:
            names = [self.names.name_of_id(optimizer, pid) for pid in sorted(state.never_grad)]
            monitor.observe(
                tor001.WITHOUT_GRAD_OBSERVATION,
                {"count": len(names), "params": names[:20], "checked_steps": list(state.checked_steps)},
                step=step,
            )
        held = {id(p) for opt in list(monitor.opts.keys()) for g in opt.param_groups for p in g["params"]}
        seen: set[int] = set()
        missing: list[tuple[str, int]] = []
        for root in monitor.roots():
            for name, p in root.named_parameters():
                if p.requires_grad and id(p) not in held and id(p) not in seen:
                    missing.append((name, p.numel()))
                seen.add(id(p))
        if missing:
            monitor.observe(
                tor001.NOT_IN_OPTIMIZER_OBSERVATION,
                {
                    "count": len(missing),
                    "numel": sum(n for _, n in missing),
                    "params": [name for name, _ in missing][:20],
                    "optimizer_tensors": len(held),
                },
                step=step,
            )
