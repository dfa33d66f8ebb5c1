"""Hugging Face Trainer's `trainer_state.json`: `log_history`, the plan and where it stopped.

The Trainer logs training entries (`loss`, `grad_norm`, `learning_rate`, every
`logging_steps`), evaluation entries (`eval_*`) and, once `train()` returns, one
summary entry (`train_runtime`, `train_loss`). Each column becomes a step series
with the epoch of every point; the summary entry records that the loop returned
(`PhaseEnd("train")`), and `max_steps` / `num_train_epochs` the plan, so a run
that stopped at step 6 of 18 is told apart from a checkpoint taken mid-run.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from trainmedic.diagnose.source import LOG_PID, LogRead
from trainmedic.errors import UsageError
from trainmedic.events import Epoch, Event, MetricSeries, PhaseEnd, Step, TrainingPlan

#: Keys of log entries that are bookkeeping, not curves.
_NOT_CURVES = frozenset({"step", "epoch", "total_flos", "num_input_tokens_seen"})
_SUMMARY_KEY = "train_runtime"
_SCALAR = re.compile(r'"(\w+)":\s*(-?[0-9][0-9.eE+\-]*|null|true|false|"[^"\\]*")')


def looks_like_trainer_state(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("log_history"), list)


def read_trainer_state(path: Path, data: dict[str, Any] | None = None) -> LogRead:
    """Read a trainer_state.json; a file cut short is salvaged entry by entry."""
    read = LogRead(path=path, format="hf-trainer-state", framework="transformers")
    if data is None:
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = _salvage(path, text, read)
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a JSON object with log_history (an HF trainer_state.json)")
    history = [e for e in data.get("log_history", []) if isinstance(e, dict)]
    _convert(read, data, history)
    return read


def _convert(read: LogRead, state: dict[str, Any], history: list[dict[str, Any]]) -> None:
    mtime = read.path.stat().st_mtime
    columns: dict[str, tuple[list[int], list[float], list[float]]] = {}
    finished = False
    last_step, last_epoch = 0, 0.0
    for entry in history:
        if _SUMMARY_KEY in entry:
            finished = True
            continue
        step = int(entry.get("step", last_step) or 0)
        epoch = float(entry.get("epoch", last_epoch) or 0.0)
        last_step, last_epoch = step, epoch
        index = float(max(0, math.ceil(epoch - 1e-9) - 1))  # HF epoch 1.0 ends the first epoch (index 0)
        for key, value in entry.items():
            if key in _NOT_CURVES or not isinstance(value, (int, float)):
                continue
            steps, values, epochs = columns.setdefault(key, ([], [], []))
            steps.append(step)
            values.append(float(value))
            epochs.append(index)
    global_step = int(state.get("global_step") or last_step)
    final_epoch = float(state.get("epoch") or last_epoch)
    max_steps = _int(state.get("max_steps"))
    epochs_planned = _int(state.get("num_train_epochs"))
    read.epochs = epochs_planned
    read.finished = finished
    events: list[Event] = []
    if max_steps or epochs_planned:
        events.append(
            TrainingPlan(
                framework="transformers",
                epochs=epochs_planned,
                max_steps=max_steps,
                batch_size=_int(state.get("train_batch_size")),
                early_stopping=_early_stopping(state),
                t=mtime - 2,
                pid=LOG_PID,
            )
        )
    for name, (steps, values, epochs) in columns.items():
        events.append(
            MetricSeries(
                name=name,
                steps=steps,
                values=values,
                epochs=epochs,
                source=str(read.path),
                t=mtime - 1,
                pid=LOG_PID,
            )
        )
    completed = int(final_epoch + 1e-6)
    events.extend(Epoch(epoch=e, t=mtime - 1, pid=LOG_PID) for e in range(completed))
    # The last step reached, so step-based rules and plans compare against it.
    events.append(
        Step(step=global_step, epoch=max(0, math.ceil(final_epoch - 1e-9) - 1), t=mtime - 0.5, pid=LOG_PID)
    )
    if finished:
        events.append(PhaseEnd(phase="train", step=global_step, epoch=completed, t=mtime, pid=LOG_PID))
    read.events = events
    read.points = sum(len(c[0]) for c in columns.values())


def _early_stopping(state: dict[str, Any]) -> bool:
    callbacks = state.get("stateful_callbacks")
    return isinstance(callbacks, dict) and any("EarlyStopping" in str(name) for name in callbacks)


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and value > 0 else None


def _salvage(path: Path, text: str, read: LogRead) -> dict[str, Any]:
    """A trainer_state.json cut mid-write: keep every complete log entry and the fields before them."""
    start = text.find('"log_history"')
    bracket = text.find("[", start) if start >= 0 else -1
    if bracket < 0:
        raise UsageError(
            f"{path}: the JSON ends early and holds no complete log_history entry; nothing readable"
        )
    state: dict[str, Any] = {}
    for key, raw in _SCALAR.findall(text[:start]):
        try:
            state[key] = json.loads(raw)
        except json.JSONDecodeError:
            continue
    decoder = json.JSONDecoder()
    entries: list[Any] = []
    pos = bracket + 1
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            break
        try:
            entry, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            read.skipped.append(
                f"the file ends early: {len(text) - pos} bytes after log entry {len(entries)} unreadable"
            )
            break
        entries.append(entry)
    if not entries:
        raise UsageError(
            f"{path}: the JSON ends early and holds no complete log_history entry; nothing readable"
        )
    state["log_history"] = entries
    return state
