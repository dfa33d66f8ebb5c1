"""The losses the hooks keep, read on the host, and the first non-finite one measured here.

Every scalar passed to `backward()` is kept with its step (the hooks append it to
`monitor.losses`): on the CPU its value, read at once; elsewhere a detached alias of
its storage (`_reads.kept`). They are judged (the aliases read in one transfer) at
the next sampled check, early at an epoch's end, or every step with
`on_nonfinite="stop"`. A
NaN/Inf loss is the one finding the guard raises itself, so that "stop" can stop
the run before the update; it is reported with the step it first appeared at and
that step's batch indices, decided and worded by TRN001's `judge_guard`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch
from trainmedic.events import FindingRaised
from trainmedic.instrument import channel
from trainmedic.rules.trn import trn001_nonfinite_loss as trn001
from trainmedic.torch._reads import floats
from trainmedic.torch._safety import NonFiniteLossError, part_never_breaks

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike

MAX_KEPT_LOSSES = 4096  # backward without optimizer steps: read them back to keep memory flat


class LossReads:
    """Reads the kept losses: what a check sends, what an epoch sums, what is non-finite."""

    def __init__(self, monitor: MonitorLike) -> None:
        self.monitor = monitor
        self.unsent: list[tuple[int, float]] = []  # losses read early (an epoch's end), not yet sent
        self.epoch_loss = [0.0, 0]
        # What the framework divided each loss by before backward(): Lightning's automatic
        # optimization divides by accumulate_grad_batches; the user's loss is the value times it.
        self.scale = 1.0

    def values(self, steps: list[int], values: list[float]) -> list[tuple[int, float]]:
        """(step, the user's loss) for the kept losses' values read back."""
        scale = self.scale
        return [(s, v * scale) for s, v in zip(steps, values, strict=True)]

    def take(self) -> tuple[list[Any], list[int]]:
        monitor = self.monitor
        losses, steps = monitor.losses, monitor.loss_steps
        monitor.losses, monitor.loss_steps = [], []
        return losses, steps

    def of_step(self, step: int) -> list[Any]:
        monitor = self.monitor
        return [t for t, s in zip(monitor.losses, monitor.loss_steps, strict=True) if s == step]

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
        bad = [(s, v) for s, v in losses if not math.isfinite(v)]
        if not bad or "nonfinite_loss" in monitor.reported:
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
            rank=channel.RANK,
        )
        finding = trn001.judge_guard(measured)
        if finding is None:
            return
        monitor.emit(FindingRaised(finding=finding.to_dict()))
        if measured.stopping:
            raise NonFiniteLossError(trn001.stopped_error(measured), finding.to_dict())

    def add_to_epoch(self, losses: list[tuple[int, float]]) -> None:
        if losses:
            self.epoch_loss[0] += sum(v for _, v in losses)
            self.epoch_loss[1] += len(losses)

    @part_never_breaks
    def take_epoch_loss(self) -> float | None:
        """Mean of every loss since the last call (one host transfer for the unchecked ones)."""
        self.drain()
        total, count = self.epoch_loss
        self.epoch_loss = [0.0, 0]
        return total / count if count else None
