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
from collections.abc import Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from trainmedic.diagnose.source import LOG_PID, LogRead
from trainmedic.errors import UsageError
from trainmedic.events import Epoch, Event, MetricSeries, PhaseEnd, Step, TrainingPlan

#: Keys of log entries that are bookkeeping, not curves.
_NOT_CURVES = frozenset({"step", "epoch", "total_flos", "num_input_tokens_seen"})
_SUMMARY_KEY = "train_runtime"
_SCALAR = re.compile(r'"(\w+)":\s*(-?[0-9][0-9.eE+\-]*|null|true|false|"[^"\\]*")')


def parse_json(raw: bytes) -> Any:
    """orjson when installed (several times faster on a large state), else json. orjson refuses the
    NaN/Infinity tokens Python's json writes for a diverged loss: those files take the json path."""
    try:
        import orjson
    except ImportError:
        return json.loads(raw)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


def looks_like_trainer_state(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("log_history"), list)


def read_trainer_state(path: Path, data: dict[str, Any] | None = None) -> LogRead:
    """Read a trainer_state.json; a file cut short is salvaged entry by entry."""
    read = LogRead(path=path, format="hf-trainer-state", framework="transformers")
    if data is None:
        raw = path.read_bytes()
        try:
            data = parse_json(raw)
        except json.JSONDecodeError:
            data = _salvage(path, raw.decode("utf-8", errors="replace"), read)
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a JSON object with log_history (an HF trainer_state.json)")
    history = [e for e in data.get("log_history", []) if isinstance(e, dict)]
    _convert(read, data, history)
    return read


def _convert(read: LogRead, state: dict[str, Any], history: list[dict[str, Any]]) -> None:
    mtime = read.path.stat().st_mtime
    columns, finished, last_step, last_epoch = _columns(history)
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
    for name, (steps, values, epochs) in sorted(columns.items()):
        events.append(
            MetricSeries(
                name=name,
                steps=cast(Sequence[int], steps),
                values=cast(Sequence[float], values),
                epochs=cast(Sequence[float], epochs),
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


Columns = dict[str, tuple["IntArray", "FloatArray", "FloatArray"]]
FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


def _columns(history: list[dict[str, Any]]) -> tuple[Columns, bool, int, float]:
    """Log entries to columns. Entries are grouped by their keys first (the Trainer writes a few
    shapes over and over), so a 100 MB state is converted column by column, not value by value."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for entry in history:
        groups.setdefault(tuple(entry), []).append(entry)
    parts: dict[str, list[tuple[FloatArray, FloatArray, FloatArray]]] = {}
    finished = False
    last_step, last_epoch = 0, 0.0
    for keys, entries in groups.items():
        if _SUMMARY_KEY in keys:
            finished = True
            continue
        steps = _numbers(entries, "step") if "step" in keys else np.zeros(len(entries))
        epochs = _numbers(entries, "epoch") if "epoch" in keys else np.zeros(len(entries))
        if np.isfinite(steps).any():
            last_step = max(last_step, int(np.max(steps[np.isfinite(steps)])))
        if np.isfinite(epochs).any():
            last_epoch = max(last_epoch, float(np.max(epochs[np.isfinite(epochs)])))
        index = np.maximum(0.0, np.ceil(epochs - 1e-9) - 1)  # HF epoch 1.0 ends the first epoch (index 0)
        for key in keys:
            if key in _NOT_CURVES or not isinstance(entries[0][key], (int, float)):
                continue
            parts.setdefault(key, []).append((steps, _numbers(entries, key), index))
    columns: Columns = {}
    for key, chunks in parts.items():
        steps = np.concatenate([c[0] for c in chunks])
        order = np.argsort(steps, kind="stable")
        columns[key] = (
            steps[order].astype(np.int64),
            np.concatenate([c[1] for c in chunks])[order],
            np.concatenate([c[2] for c in chunks])[order],
        )
    return columns, finished, last_step, last_epoch


def _numbers(entries: list[dict[str, Any]], key: str) -> FloatArray:
    values = list(map(itemgetter(key), entries))
    try:
        return np.fromiter(values, dtype=np.float64, count=len(values))
    except (TypeError, ValueError):  # null / strings among the numbers
        return np.array([v if isinstance(v, (int, float)) else math.nan for v in values], dtype=np.float64)


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
