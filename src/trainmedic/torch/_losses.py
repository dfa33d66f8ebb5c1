"""The losses the hooks keep, read on the host, the first non-finite one measured here, and
what predicting the targets' mean would have cost (`MeanPrediction`).

Every scalar passed to `backward()` is kept with its step (the hooks append it to
`monitor.losses`): on the CPU its value, read at once; elsewhere a detached alias of
its storage (`_reads.kept`). They are judged (the aliases read in one transfer) at
the next sampled check, early at an epoch's end, or every step with
`on_nonfinite="stop"`. A
NaN/Inf loss is the one finding the guard raises itself, so that "stop" can stop
the run before the update; it is reported with the step it first appeared at and
that step's batch indices, decided and worded by TRN001's `judge_guard`.

The yardstick of a regression (TRN003's `mean_prediction` observation): on checked steps
whose loss is a mean squared error (`F.mse_loss`, `nn.MSELoss`, scaled by a constant or not),
the autograd node of the loss still holds its prediction and its target until backward().
From them, on that step only: the batch's squared error, and the targets' sums per output
column, added up over the run: the loss of predicting the targets' mean is their variance
pooled over every batch measured, averaged over the columns (the least a model that knows
nothing of its inputs can reach). No loss function is wrapped; the other steps pay nothing.
An L1 loss keeps no target in its graph (only the residual), and a Huber loss's best
constant has no closed form: neither is measured.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from trainmedic.events import FindingRaised
from trainmedic.instrument import channel
from trainmedic.rules.trn import trn001_nonfinite_loss as trn001
from trainmedic.rules.trn.trn003_not_learning import MEAN_PREDICTION_OBSERVATION
from trainmedic.torch._reads import all_finite, floats, loss_sum
from trainmedic.torch._safety import NonFiniteLossError, part_never_breaks

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike

MAX_KEPT_LOSSES = 4096  # backward without optimizer steps: read them back to keep memory flat
MEAN_BLOCK = 8  # sampled batches per `mean_prediction` observation (an epoch's end sends one too)
MEAN_BLOCK_DEVICE = 64  # on an accelerator: one host read per 64 checked steps, or an epoch's end
MEAN_MIN_ROWS = 8  # a batch's variance from fewer targets is mostly noise
_SCALINGS = ("MulBackward0", "DivBackward0")


class LossReads:
    """Reads the kept losses: what a check sends, what an epoch sums, what is non-finite."""

    def __init__(self, monitor: MonitorLike) -> None:
        self.monitor = monitor
        self.unsent: list[tuple[int, float]] = []  # losses read early (an epoch's end), not yet sent
        self.epoch_loss = [0.0, 0]
        # What the framework divided each loss by before backward(): Lightning's automatic
        # optimization divides by accumulate_grad_batches; the user's loss is the value times it.
        self.scale = 1.0
        self.targets = MeanPrediction(monitor)

    def values(self, steps: list[int], values: list[float]) -> list[tuple[int, float]]:
        """(step, the user's loss) for the kept losses' values read back (paired in C when the
        framework did not scale them)."""
        scale = self.scale
        if scale == 1.0:
            return list(zip(steps, values, strict=True))
        return [(s, v * scale) for s, v in zip(steps, values, strict=True)]

    def take(self) -> tuple[list[Any], list[int]]:
        monitor = self.monitor
        losses, steps = monitor.losses, monitor.loss_steps
        monitor.losses, monitor.loss_steps = [], []
        return losses, steps

    def of_step(self, step: int) -> list[Any]:
        """The kept losses of `step`. They are the last ones kept (losses come in step order), taken
        as a slice counted in C; a loop in Python only when they are not (an optimizer that took
        over numbers its steps from its own count)."""
        monitor = self.monitor
        losses, steps = monitor.losses, monitor.loss_steps
        count = steps.count(step)
        if steps[len(steps) - count :].count(step) == count:
            return losses[len(losses) - count :]
        return [t for t, s in zip(losses, steps, strict=True) if s == step]

    def drain(self) -> list[tuple[int, float]]:
        losses, steps = self.take()
        if not losses:
            return []
        with torch.no_grad():
            pairs = self.values(steps, floats(losses))
        self.add_to_epoch(pairs)
        self.unsent.extend(pairs)  # sent with the next check's windows
        del self.unsent[:-MAX_KEPT_LOSSES]  # backward without optimizer steps: no window to send
        self.check_nonfinite(pairs, self.monitor.step)
        return pairs

    def check_now(self, step: int) -> None:
        """`on_nonfinite="stop"`: this step's losses, read before the update (one read per step)."""
        current = self.of_step(step)
        if not current:
            return
        with torch.no_grad():
            finite = all(math.isfinite(v) for v in floats(current))
        if not finite:
            self.drain()

    def check_nonfinite(self, losses: list[tuple[int, float]], step: int) -> None:
        monitor = self.monitor
        if "nonfinite_loss" in monitor.reported or all_finite(losses):
            return
        bad = [(s, v) for s, v in losses if not math.isfinite(v)]
        if not bad:
            return
        monitor.reported.add("nonfinite_loss")
        first_step, value = bad[0]
        finite_before = [v for s, v in losses if s < first_step and math.isfinite(v)]
        measured = trn001.GuardLoss(
            step=first_step,
            loss=value,
            last_finite_loss=finite_before[-1] if finite_before else None,
            epoch=monitor.known_epoch(),
            every=monitor.every,
            stopping=monitor.stop_on_nonfinite,
            batch_indices=monitor.batches.of_step(first_step) or (),
            inputs=monitor.batches.inputs_of(first_step),
            rank=channel.current_rank(),
        )
        finding = trn001.judge_guard(measured)
        if finding is None:
            return
        monitor.emit(FindingRaised(finding=finding.to_dict()))
        if measured.stopping:
            raise NonFiniteLossError(trn001.stopped_error(measured), finding.to_dict())

    def add_to_epoch(self, losses: list[tuple[int, float]]) -> None:
        if losses:
            self.epoch_loss[0] += loss_sum(losses)
            self.epoch_loss[1] += len(losses)

    def after_targets(self, end: Callable[[], None]) -> Callable[[], None]:
        """`end` (of a notebook cell, of the run) once the yardstick's last block is sent."""

        def ending() -> None:
            self.targets.send()
            end()

        return ending

    @part_never_breaks
    def take_epoch_loss(self) -> float | None:
        """Mean of every loss since the last call (one host transfer for the unchecked ones)."""
        self.drain()
        self.targets.send()
        total, count = self.epoch_loss
        self.epoch_loss = [0.0, 0]
        return total / count if count else None


class MeanPrediction:
    """On checked steps, a mean squared error's batch loss, and its targets' sums per output
    column; sent in blocks as `mean_prediction` observations.

    The mean's loss is the targets' variance pooled over every batch measured so far, around
    their pooled mean: the loss of one constant for every input, whatever the order of the
    batches (a batch of one store, of one day, of neighbours in a table sorted by its target
    has a small variance of its own).
    """

    def __init__(self, monitor: MonitorLike) -> None:
        self.monitor = monitor
        self.pending: list[tuple[int, int, Any]] = []  # (step, rows, the batch's squared error)
        self.sums: Any = None  # the targets so far, per column: [sum, sum of squares], float64
        self.rows = 0

    @part_never_breaks
    def note(self, loss: Any, step: int) -> None:
        """Just before backward() on a checked step: read the live graph's prediction and target."""
        pair = _prediction_and_target(loss)
        if pair is None:
            return
        prediction, target = pair
        with torch.no_grad():
            error = (prediction - target).square().mean()
            columns = target.double()
            sums = torch.stack([columns.sum(0), columns.square().sum(0)])
        if self.sums is not None and (self.sums.shape != sums.shape or self.sums.device != sums.device):
            self.send()  # other outputs: another yardstick
            self.sums, self.rows = None, 0
        self.sums = sums if self.sums is None else self.sums + sums
        self.rows += len(target)
        self.pending.append((step, len(target), error.item() if error.is_cpu else error))
        if len(self.pending) >= (MEAN_BLOCK if error.is_cpu else MEAN_BLOCK_DEVICE):
            self.send()

    @part_never_breaks
    def send(self) -> None:
        """One observation for the batches measured since the last (one host read for them all)."""
        pending, sums, rows, self.pending = self.pending, self.sums, self.rows, []
        if not pending or rows < 2:
            return
        with torch.no_grad():
            variance = (sums[1] - sums[0].square() / rows) / (rows - 1)  # per column, unbiased
            unread = [e for _, _, e in pending if isinstance(e, torch.Tensor)]
            read = torch.stack([variance.mean().float(), *[e.float() for e in unread]]).tolist()
        errors = iter(read[1:])
        loss_sum = sum(e if not isinstance(e, torch.Tensor) else next(errors) for _, _, e in pending)
        self.monitor.observe(
            MEAN_PREDICTION_OBSERVATION,
            {
                "loss": "mse",
                "first_step": pending[0][0],
                "last_step": pending[-1][0],
                "batches": len(pending),
                "rows": sum(r for _, r, _ in pending),
                "loss_sum": float(loss_sum),
                "mean_prediction_sum": len(pending) * float(read[0]),
                "source": "autograd graph: mse_loss's targets on checked steps",
            },
            once=False,
            step=pending[-1][0],
        )


def _prediction_and_target(loss: Any) -> tuple[Any, Any] | None:
    """(prediction, target), detached and as (rows, columns) float tensors, of a loss that is
    an MSE (under a constant factor at most); None for any other loss."""
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        return None
    node: Any = loss.grad_fn
    for _ in range(4):  # `loss / accumulation_steps`, `0.5 * mse`: a constant factor
        if node is None or node.name() not in _SCALINGS:
            break
        try:
            other = node._saved_other
        except RuntimeError:  # not saved: the factor is the operand that needs a gradient
            return None
        if not isinstance(other, torch.Tensor) or other.dim() != 0 or other.requires_grad:
            return None
        node = node.next_functions[0][0]
    if node is None or node.name() != "MseLossBackward0":
        return None
    try:
        prediction, target = node._saved_self, node._saved_target
    except RuntimeError:  # freed: a second backward through a retained graph
        return None
    # A target the model computes (a consistency loss) has no mean to predict; a broadcast one
    # (an (N, 1) output against (N,) targets, saved expanded: a stride of 0) compares every row
    # with every target.
    if target.requires_grad or prediction.shape != target.shape or target.dim() == 0:
        return None
    if _expanded(prediction) or _expanded(target):
        return None
    if type(prediction) is not torch.Tensor or type(target) is not torch.Tensor:
        return None  # a subclass (a DTensor) may need a collective to give its values
    rows = int(target.shape[0])
    if rows < MEAN_MIN_ROWS or not target.is_floating_point():
        return None
    return prediction.detach().reshape(rows, -1).float(), target.detach().reshape(rows, -1).float()


def _expanded(tensor: Any) -> bool:
    """A broadcast view: a dimension of several entries that all share one element."""
    return any(stride == 0 and size > 1 for stride, size in zip(tensor.stride(), tensor.shape, strict=True))
