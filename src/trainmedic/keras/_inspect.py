"""What `fit` was given, described without touching the data.

Everything here reads attributes and calls `len()` only: no batch is fetched,
no random number is drawn, so describing an input never changes the run. The
description is a plain dict that travels in a `GuardObservation("keras_input")`
and that the KER rules read.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Mapping
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
    return _array_rows(x)


def _array_rows(x: object) -> int | None:
    shape = getattr(x, "shape", None)
    if shape is not None and len(shape) > 0 and shape[0] is not None:
        try:
            return int(shape[0])
        except (TypeError, ValueError):
            return None
    return None


#: How deep `_container_rows` looks into lists, tuples and dicts (`shards = [({"image": x}, y)]` is 3).
CONTAINER_DEPTH = 4
#: How many items `_container_rows` reads in all, per attribute: a list longer than this (a
#: million file names, a million small shards) says nothing about its rows, and costs nothing.
CONTAINER_ITEMS = 1024

# What a nested container holds: its rows and its layout (the trailing shapes of its arrays),
# which tells shards of one data set (same layout) from parallel arrays (x and y).
_Held = tuple[int, object]


def _container_rows(value: object, batches: int | None) -> int | None:
    """Rows held by arrays in lists/tuples/dicts at any depth: shards add up, parallel arrays count once.

    Items of one layout (arrays of one trailing shape, or (x, y) pairs of the same shapes) are
    shards of one data set when their row counts differ (the last shard is the rest) or when
    there is one per batch the sequence yields (a `__len__` that counts shards); otherwise they
    are parallel (x and y, the inputs of a multi-input model, anchor/positive/negative) and
    share their rows. Counting parallel arrays once can only undercount, which never makes a
    healthy sequence look short. Other items (strings, numbers, None) are ignored. The walk
    stops at CONTAINER_DEPTH levels and CONTAINER_ITEMS items: past either, nothing is known.
    """
    budget = [CONTAINER_ITEMS]
    held = _walk(value, batches, CONTAINER_DEPTH, budget, top=True)
    return held[0] if held is not None and budget[0] >= 0 else None


def _walk(
    value: object, batches: int | None, depth: int, budget: list[int], *, top: bool = False
) -> _Held | None:
    rows = _array_rows(value)
    if rows is not None:
        return rows, tuple(getattr(value, "shape", ()))[1:]
    if depth <= 0 or budget[0] < 0:
        return None
    items: Collection[object]
    if isinstance(value, Mapping):
        items = value.values()
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        return None
    if len(items) > budget[0]:
        budget[0] = -1
        return None
    budget[0] -= len(items)
    held = [h for item in items if (h := _walk(item, batches, depth - 1, budget)) is not None]
    if not held or budget[0] < 0:
        return None
    counts = [rows for rows, _ in held]
    layouts = {layout for _, layout in held}
    per_batch = top and len(counts) == batches
    shards = len(layouts) == 1 and len(counts) > 1 and (len(set(counts)) > 1 or per_batch)
    if shards:
        return sum(counts), ("shards", *layouts)
    return max(counts), tuple(layout for _, layout in held)


def _held_rows(value: object, batches: int | None) -> int | None:
    """Rows of an array attribute, or of the arrays inside a container attribute."""
    return _array_rows(value) or _container_rows(value, batches)


def sequence_hints(seq: object) -> tuple[int | None, int | None]:
    """(samples, batch_size) a Sequence reveals through its attributes, or None.

    Samples: a count attribute (n_samples ...), else the data under a common name (x,
    filenames ...), else the largest set of arrays any attribute holds, directly or in a
    list, tuple or dict at any depth (shards, (x, y) pairs, named columns).
    """
    batch_size = None
    for name in BATCH_ATTRS:
        value = getattr(seq, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            batch_size = value
            break
    for name in COUNT_ATTRS:
        value = getattr(seq, name, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, batch_size
    batches = _length(seq)
    for name in SAMPLE_ATTRS:
        value = getattr(seq, name, None)
        if value is None or (callable(value) and not hasattr(value, "shape")):
            continue
        # A list of per-sample (image, label) pairs holds arrays whose first axis is not the
        # samples: its own length, never more than its samples, bounds the count from below.
        length = max(_held_rows(value, batches) or 0, _length(value) or 0)
        if length:
            return length, batch_size
    try:
        attributes = list(vars(seq).values())
    except TypeError:  # __slots__ without __dict__
        attributes = []
    held = [rows for value in attributes if (rows := _held_rows(value, batches))]
    return (max(held) if held else None), batch_size


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


#: Compiled losses whose value for a model that predicts the same distribution for every input
#: is known: ln K over K classes for the categorical ones, ln 2 for the binary one.
CROSS_ENTROPY_LOSSES = {
    "sparse_categorical_crossentropy": "categorical",
    "categorical_crossentropy": "categorical",
    "binary_crossentropy": "binary",
}


def _snake(name: str) -> str:
    """'SparseCategoricalCrossentropy' -> 'sparse_categorical_crossentropy'."""
    out = [f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(name)]
    return "".join(out)


def loss_name(loss: object) -> str | None:
    """The compiled loss as Keras names it (string, function or Loss object), else None."""
    if isinstance(loss, str):
        return loss.lower()
    name = getattr(loss, "__name__", None) or type(loss).__name__
    if not isinstance(name, str) or name in {"dict", "list", "tuple", "NoneType"}:
        return None
    return _snake(name) if any(c.isupper() for c in name) else name.lower()


def output_units(model: object) -> int | None:
    """The width of a single-output model's last layer, when the model is built."""
    try:
        outputs = model.outputs  # type: ignore[attr-defined]
    except Exception:  # a subclassed model that is not built yet has none
        return None
    if not outputs or len(outputs) != 1:
        return None
    shape = getattr(outputs[0], "shape", None)
    try:
        width = shape[-1] if shape is not None and len(shape) > 1 else None
    except TypeError:
        return None
    return int(width) if isinstance(width, int) and width > 0 else None


def describe_loss(model: object) -> dict[str, Any] | None:
    """{"loss", "classes", "source"} for a compiled cross-entropy loss, else None.

    The classes decide the chance level TRN003 compares the loss with; they come from the
    compiled loss and the width of the output layer, read from attributes only.
    """
    name = loss_name(getattr(model, "loss", None))
    kind = CROSS_ENTROPY_LOSSES.get(name or "")
    if kind is None:
        return None
    units = output_units(model)
    if kind == "binary":
        return {"loss": name, "classes": 2, "source": f"compiled loss {name}"}
    if units is None or units < 2:
        return None
    return {"loss": name, "classes": units, "source": f"compiled loss {name}, output layer of width {units}"}


def _activation_name(layer: object) -> str | None:
    """The activation a layer applies last: its `activation` function, or the layer itself (Softmax)."""
    activation = getattr(layer, "activation", None)
    if activation is not None:
        name = getattr(activation, "__name__", None) or type(activation).__name__
        return name.lower() if isinstance(name, str) else None
    if type(layer).__name__ == "Softmax":
        return "softmax"
    return None


def _is_graph_model(model: object) -> bool:
    """A Sequential or functional model, of any Keras line (its layers are in graph order)."""
    return any(cls.__name__ in {"Sequential", "Functional"} for cls in type(model).__mro__)


def describe_output(model: object) -> dict[str, Any] | None:
    """{"layer", "layer_class", "activation", "units", "loss"} of a model's last layer.

    KER004 reads it: a softmax over an output of width 1 is 1.0 for every input. Attributes
    only, like the rest of this module. The width is the last layer's `units` (Dense, known
    before the model is built), else the single output of a Sequential or functional model,
    whose last layer is its output layer (a subclassed model lists its layers in the order
    they were assigned, so there the last one says nothing about the output).
    """
    try:
        layers = model.layers  # type: ignore[attr-defined]
    except Exception:  # a model that cannot list its layers is not described
        return None
    if not layers:
        return None
    last = layers[-1]
    width = getattr(last, "units", None)  # a Dense layer knows its width before it is built
    units = width if isinstance(width, int) and not isinstance(width, bool) and width > 0 else None
    if units is None and _is_graph_model(model):  # a Softmax / Activation layer: the model's output
        units = output_units(model)
    if units is None:
        return None
    return {
        "layer": str(getattr(last, "name", type(last).__name__)),
        "layer_class": type(last).__name__,
        "activation": _activation_name(last),
        "units": units,
        "loss": loss_name(getattr(model, "loss", None)),
    }
