"""The explicit guard: `trainmedic.torch.guard(model, optimizer)`, also a context manager."""

from __future__ import annotations

import atexit
import logging
from typing import Any

from trainmedic.events import Event
from trainmedic.findings import Finding, Severity
from trainmedic.instrument import channel
from trainmedic.record import Rule, RunRecord
from trainmedic.registry import rules_for, run_rules
from trainmedic.torch import _patches, _saves
from trainmedic.torch._monitor import Monitor
from trainmedic.torch._safety import contained

log = logging.getLogger("trainmedic")
#: What the guard measures on steps and the loss curves, and what its watchers observe (the
#: fine-tuning data, TRL's preference and RL logs, the HF Trainer's eval set): the rules of every
#: finding declared `decided_in=("torch guard", ...)`.
RULES: tuple[Rule, ...] = rules_for("torch guard")


class Guard:
    """Watches PyTorch training in this process; `findings()` says what went wrong.

    Thresholds: `every` (steps between host-syncing checks; by default 10, widened on
    CPU-only training when the checks would cost more than 0.5 % of the step time),
    `on_nonfinite` ("warn" or "stop": raise NonFiniteLossError before a NaN/Inf
    update, checking the loss every step), `patience` (optimizer steps without
    zeroing before TOR003).

    Cost and its trade-off: an unsampled step runs no tensor op but one for the loss
    (on the CPU, reading its value, no sync there; elsewhere a `detach()` alias: no
    kernel, no copy, no host read), so with "warn" a
    NaN/Inf loss is reported at most `every - 1` steps late, at the step it first
    appeared; a gradient explosion between two sampled norms is caught from the
    kept losses and the parameter norm.
    """

    def __init__(
        self,
        model: Any = None,
        optimizer: Any = None,
        *,
        every: int | None = None,
        on_nonfinite: str = "warn",
        patience: int = 10,
    ) -> None:
        self.events: list[Event] = []
        self._stopped = False
        # Outside `run` there is no events file: skip the channel's lookups on every event.
        self._supervised = channel.is_supervised()
        existing = _patches.active()
        if existing is not None:  # auto-instrumented under `trainmedic run`: join it
            self.monitor, self._owner = existing, False
            existing.sinks.append(self.events.append)
            if on_nonfinite == "stop":
                existing.stop_on_nonfinite = True
                existing.wake()  # every step's loss is read from the next one on
        else:
            self.monitor = Monitor(
                self._sink, every=every, on_nonfinite=on_nonfinite, patience=patience, mode="explicit"
            )
            self._owner = True
            _patches.install(self.monitor)
            atexit.register(self.stop)
        if model is not None:
            self.monitor.watch_model(model)
        if optimizer is not None:
            self.monitor.set_primary(optimizer)

    def _sink(self, event: Event) -> None:
        self.events.append(event)
        if self._supervised:
            channel.emit(event)

    def stop(self) -> list[Finding]:
        """Stop watching (restoring every patched function) and log findings at warning or above."""
        if self._stopped:
            return self.findings()
        self._stopped = True
        if self._owner:
            contained(self.monitor, "save checks", _saves.finish, self.monitor)  # waits for their worker
            self.monitor.close()
            _patches.uninstall()
        else:
            self.monitor.sinks.remove(self.events.append)
        found = self.findings()
        for finding in found:
            if finding.severity.at_least(Severity.WARNING):
                log.warning("trainmedic %s %s: %s", finding.code, finding.slug, finding.message)
        return found

    def findings(self) -> list[Finding]:
        """What the rules conclude from everything measured so far."""
        return run_rules(RunRecord.of(self.events), RULES)

    def __enter__(self) -> Guard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def guard(model: Any = None, optimizer: Any = None, **thresholds: Any) -> Guard:
    """Start guarding PyTorch training in this process (see `Guard` for the thresholds)."""
    return Guard(model, optimizer, **thresholds)
