"""The monitor as its hooks and parts see it, and the record it keeps per optimizer.

`_patches`, `_forward`, `_clipping` and the monitor's parts (`_checks`, `_curve`,
`_losses`, `_hygiene`...) talk to the monitor through `MonitorLike`, never through
`_monitor.Monitor` itself: the facade imports its parts, and none of them imports
the facade back. The parts that hold this interface themselves (the forward watch, the loss
reads, the scaler watch) are seen here through the protocols of what others use of them, so
that this module names none of them either.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from trainmedic.events import Event

if TYPE_CHECKING:
    from torch import nn
    from trainmedic.torch._batches import LoaderBatches
    from trainmedic.torch._manual import ParameterUpdates
    from trainmedic.torch._zeroing import GradZeroWatch

Sink = Callable[[Event], None]


@dataclass(eq=False, slots=True)
class OptState:
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
    scheduler_kinds: set[type] = field(default_factory=set)  # the schedulers seen stepping it


class ClipHooks(Protocol):
    """What the clipping wrappers call (`_clipping.ClipWatch`)."""

    pending: deque[Any]  # the norm clippings since the last read (`_clipping._Clip`)

    def samples_now(self) -> bool: ...
    def norm_of(self, params: list[Any]) -> Any: ...
    def on_value_clip(self, params: list[Any], before: Any, clip_value: Any) -> None: ...


class ForwardHooks(Protocol):
    """What the hooks, the run's endings and other packages use of the forward watch
    (`_forward.ForwardWatch`)."""

    roots: weakref.WeakSet[nn.Module]  # the root modules met (the model, learned from its calls)
    is_open: bool  # the global module hooks are on (a watched forward pass)

    def open(self) -> None: ...
    def close(self, step: int | None, losses: list[Any] | None = None) -> None: ...


class LossHooks(Protocol):
    """What a framework's guard sets on the loss reads (`_losses.LossReads`)."""

    scale: float  # the factor the framework divided the user's loss by before backward()


class ScalerHooks(Protocol):
    """What the `GradScaler.unscale_` wrapper and the run's endings use of the scaler watch
    (`_scaler.ScalerWatch`)."""

    unscales: int
    read_at: int
    probe: bool

    def after_unscale(self, scaler: Any, optimizer: Any) -> None: ...
    def close(self) -> None: ...


class Watcher(Protocol):
    """A watch another package adds to the monitor (`monitor.watchers`), e.g. `trainmedic.llm`'s.

    `on_check` runs on each checked step of the primary optimizer, after the step's reads,
    while its gradients are final and before the update; `on_close` once at the end. Both are
    `contained`: one that raises costs only itself.
    """

    def on_check(self, step: int) -> None: ...
    def on_close(self) -> None: ...


class MonitorLike(Protocol):
    """The monitor's state and calls that its hooks, watches and parts use.

    The attributes the hooks read or write on every step (`plain_backward`, `losses`,
    `loss_steps`, `step`, `data_wait`, `broken`) are plain ones: a read, a store or an append.
    """

    sinks: list[Sink]
    broken: bool
    reported: set[str]
    step: int
    epoch: int
    every: int
    base_every: int
    adaptive: bool
    stop_on_nonfinite: bool
    patience: int
    mode: str
    framework_epochs: bool
    loaders_seen: bool
    data_wait: float
    losses: list[Any]
    loss_steps: list[int]
    plain_backward: bool
    quiet_until: int
    pre_step: Callable[[bool], None]  # switches the optimizer pre-step hook off and on
    pre_step_on: bool
    batches: LoaderBatches
    optimizers_made: weakref.WeakSet[Any]
    primary: Any  # weakref to the optimizer whose steps number the run (None before one steps)
    manual: ParameterUpdates | None  # stands in for the optimizer of a loop without one
    manual_decided: bool
    adopt_next: bool  # a notebook cell ended: the next optimizer to step may be a new one
    opts: weakref.WeakKeyDictionary[Any, OptState]
    watchers: list[Watcher]  # checks added by other packages (`trainmedic.llm`), run on checked steps

    @property  # read-only here (a plain attribute on the monitor): a part of its own type satisfies it
    def forward(self) -> ForwardHooks: ...
    @property
    def reads(self) -> LossHooks: ...
    @property
    def clipping(self) -> ClipHooks: ...
    @property
    def scaler(self) -> ScalerHooks: ...
    def emit(self, event: Event) -> None: ...
    def observe(
        self, check: str, data: dict[str, Any], *, once: bool = True, step: int | None = None
    ) -> None: ...
    def roots(self) -> list[nn.Module]: ...
    def known_epoch(self) -> int | None: ...
    def is_primary(self, optimizer: Any) -> bool: ...
    def state_of(self, optimizer: Any) -> OptState | None: ...
    def watch_model(self, model: nn.Module) -> None: ...
    def set_primary(self, optimizer: Any) -> None: ...
    def wake(self) -> None: ...
    def take_epoch_loss(self) -> float | None: ...
    def settle(self) -> None: ...
    def close(self) -> None: ...

    # The hooks of `_patches`.
    def on_backward(self, tensors: Any, keeps_graph: bool = False) -> None: ...
    def after_backward(self, tensors: Any) -> None: ...
    def before_rescale(self) -> None: ...
    def after_rescale(self) -> None: ...
    def on_step_pre(self, optimizer: Any, args: Any, kwargs: Any) -> Any: ...
    def on_step_post(self, optimizer: Any, args: Any, kwargs: Any) -> None: ...
    def on_loader_start(self, iterator: Any) -> None: ...
    def on_loader_exhausted(self, iterator: Any) -> None: ...
    def on_sampler_iter(self, sampler: Any) -> None: ...
    def on_scheduler_step(self, scheduler: Any) -> None: ...
