"""What `fit` was given, described without touching the data.

Everything here reads attributes and calls `len()` only: no batch is fetched,
no random number is drawn, so describing an input never changes the run. The
description is a plain dict that travels in a `GuardObservation("keras_input")`
and that the KER rules read.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# Bytes per entry of the index list the Keras adapters build when shuffling a Sequence:
# `list(range(n))` holds an 8-byte pointer and a 28-byte int object per batch index.
INDEX_BYTES_PER_BATCH = 36
# Attribute names under which Sequence implementations commonly keep their samples / batch size.
SAMPLE_ATTRS = (
    "x",
    "X",
    "x_set",
    "data",
    "images",
    "inputs",
    "features",
    "samples",
    "filenames",
    "files",
    "paths",
    "image_paths",
    "ids",
    "list_IDs",
    "indices",
    "indexes",
    "df",
    "dataframe",
)
COUNT_ATTRS = ("n", "n_samples", "num_samples", "samples_count")
BATCH_ATTRS = ("batch_size", "bs", "batch")
DEFAULT_BATCH_SIZE = 32  # what Keras uses for arrays when fit gets no batch_size


def is_sequence(x: object) -> bool:
    """A keras.utils.Sequence / PyDataset of any Keras line, recognised by its class names."""
    for cls in type(x).__mro__:
        module = cls.__module__ or ""
        if cls.__name__ in {"Sequence", "PyDataset"} and module.split(".")[0] in {"keras", "tf_keras"}:
            return True
    return False


def _length(value: object) -> int | None:
    if isinstance(value, (str, bytes)):
        return None
    try:
        return len(value)  # type: ignore[arg-type]
    except Exception:  # any user object: a failing __len__ just means "unknown"
        return None


def _first_array_length(x: object) -> int | None:
    """Rows of an array input (numpy/tensor, or the first of a list/dict of them)."""
    if isinstance(x, Mapping):
        x = next(iter(x.values()), None)
    elif isinstance(x, (list, tuple)) and x and not isinstance(x[0], (int, float)):
        x = x[0]
    shape = getattr(x, "shape", None)
    if shape is not None and len(shape) > 0 and shape[0] is not None:
        try:
            return int(shape[0])
        except (TypeError, ValueError):
            return None
    return None


def sequence_hints(seq: object) -> tuple[int | None, int | None]:
    """(samples, batch_size) a Sequence reveals through common attribute names, or None."""
    batch_size = None
    for name in BATCH_ATTRS:
        value = getattr(seq, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            batch_size = value
            break
    samples = None
    for name in COUNT_ATTRS:
        value = getattr(seq, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            samples = value
            break
    if samples is None:
        for name in SAMPLE_ATTRS:
            value = getattr(seq, name, None)
            if value is None or (callable(value) and not hasattr(value, "shape")):
                continue
            length = _first_array_length(value) or _length(value)
            if length:
                samples = length
                break
    return samples, batch_size


def memory_available() -> int | None:
    """Bytes this process may use: the smaller of physical memory and its cgroup limit."""
    limits: list[int] = []
    with contextlib.suppress(ValueError, OSError, AttributeError):
        limits.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    limit = _cgroup_limit()
    if limit:
        limits.append(limit)
    return min(limits) if limits else None


def _cgroup_limit() -> int | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            candidate = Path("/sys/fs/cgroup/memory") / path.lstrip("/") / "memory.limit_in_bytes"
        elif controllers == "":
            candidate = Path("/sys/fs/cgroup") / path.lstrip("/") / "memory.max"
        else:
            continue
        try:
            text = candidate.read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:
            return int(text)
    return None


def describe_input(
    x: object,
    *,
    batch_size: int | None = None,
    shuffle: object = True,
    steps_per_epoch: int | None = None,
    epochs: int | None = None,
    initial_epoch: int = 0,
    validation_split: float = 0.0,
) -> dict[str, Any]:
    """The facts the KER rules need about a fit input, as plain JSON-able data."""
    info: dict[str, Any] = {
        "input_type": type(x).__name__,
        "input_class": f"{type(x).__module__}.{type(x).__qualname__}",
        "shuffle": shuffle if isinstance(shuffle, (bool, str)) else bool(shuffle),
        "steps_per_epoch": steps_per_epoch,
        "epochs": epochs,
        "initial_epoch": initial_epoch,
        "batch_size": batch_size,
        "samples": None,
        "sequence_len": None,
        "is_sequence": False,
        "memory_bytes": memory_available(),
    }
    if is_sequence(x):
        info["is_sequence"] = True
        info["sequence_len"] = _length(x)
        samples, hinted_batch = sequence_hints(x)
        info["samples"] = samples
        info["batch_size"] = hinted_batch
        if info["sequence_len"] is not None:
            info["index_bytes"] = INDEX_BYTES_PER_BATCH * info["sequence_len"]
        return info
    rows = _first_array_length(x)
    if rows is not None:
        # Keras keeps the first int(n * (1 - validation_split)) rows for training.
        info["samples"] = int(rows * (1 - validation_split)) if validation_split else rows
        info["batch_size"] = batch_size or DEFAULT_BATCH_SIZE
    return info
