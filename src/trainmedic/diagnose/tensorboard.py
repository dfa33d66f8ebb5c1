"""TensorBoard event files: every scalar, fast enough for a million points.

An event file is a sequence of TFRecords (`uint64 length`, `uint32 masked CRC of
the length`, payload, `uint32 CRC`) whose payloads are `Event` protobufs. Parsing
a million of them one by one with protobuf takes ~10 s here, and tensorboard's
`EventAccumulator` also keeps only a reservoir sample of 10 000 points per tag by
default, which would hide the step a loss went NaN. So the scalars written by
`SummaryWriter.add_scalar` / `tf.summary.scalar` are read in bulk with numpy:

1. record starts are found without a Python loop: every offset whose payload
   starts like an `Event` (`wall_time`, tag byte 0x09) and whose length field
   carries a valid masked CRC-32C (a false match has odds of 2^-32); the starts
   must chain exactly (each record ends where the next begins), else the file is
   walked record by record;
2. records laid out as one `simple_value` scalar (the common case) are decoded
   with vectorised gathers; everything else (tensor scalars of `tf.summary`,
   several values per event) goes through protobuf, record by record.

A file cut mid-record (a writer killed) keeps every complete record; the cut
tail is reported as skipped.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from trainmedic.diagnose.source import LOG_PID, LogRead
from trainmedic.events import Epoch, Event, MetricSeries

U8 = NDArray[np.uint8]
I64 = NDArray[np.int64]

_HEADER = 12  # length (8) + length CRC (4)
_FOOTER = 4
_WALL_TIME = 0x09  # Event.wall_time: field 1, fixed64
_STEP = 0x10  # Event.step: field 2, varint
_SUMMARY = 0x2A  # Event.summary: field 5, bytes
_VALUE = 0x0A  # Summary.value: field 1, bytes
_TAG = 0x0A  # Summary.Value.tag: field 1, bytes
_SIMPLE = 0x15  # Summary.Value.simple_value: field 2, float32
_MASK_DELTA = 0xA282EAD8
_PAD = 32


def is_event_file(path: Path) -> bool:
    return "tfevents" in path.name


def event_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    return sorted(p for p in root.rglob("*tfevents*") if p.is_file())


@dataclass(slots=True)
class _Scalars:
    """Scalars of one tag, in file order."""

    steps: list[I64] = field(default_factory=list)
    values: list[NDArray[np.float64]] = field(default_factory=list)
    walls: list[NDArray[np.float64]] = field(default_factory=list)

    def add(self, steps: I64, values: NDArray[np.float64], walls: NDArray[np.float64]) -> None:
        self.steps.append(steps)
        self.values.append(values)
        self.walls.append(walls)


def read_tensorboard(root: Path) -> LogRead:
    """Every scalar under `root` (a file or a folder of runs); tags are prefixed by the run folder."""
    read = LogRead(path=root, format="tensorboard", framework="tensorboard")
    tags: dict[str, _Scalars] = {}
    files = event_files(root)
    for path in files:
        prefix = "" if root.is_file() else "/".join(path.relative_to(root).parent.parts)
        for tag, scalars in _read_file(path, read).items():
            name = f"{prefix}/{tag}" if prefix else tag
            target = tags.setdefault(name, _Scalars())
            target.steps += scalars.steps
            target.values += scalars.values
            target.walls += scalars.walls
    read.events = _events(tags, read)
    read.points = sum(sum(len(v) for v in s.values) for s in tags.values())
    if any(_is_keras_epoch_tag(name) for name in tags):
        read.framework = "keras"
    return read


#: Subfolders holding one split of a single run (Keras' TensorBoard callback writes train/ and validation/).
SPLIT_FOLDERS = frozenset({"train", "training", "validation", "val", "valid", "eval", "evaluation", "test"})


def restart_chain(root: Path) -> list[LogRead] | None:
    """The run folders of a logdir read as separate sources, when they are one run and its restarts.

    `tensorboard --logdir` takes the parent of one folder per run, so users hand that
    parent over. Read as one source, each folder's tags keep its name as a prefix
    (`run1/loss`, `run2/loss`) and a divergence that spans the restart is cut in two.
    When every folder after the first (by first write time) starts at a step above 0,
    they resume one training: read one by one, their tags merge in time order as if the
    folders had been given as separate paths. Independent runs (each from step 0) stay
    apart (None).
    """
    if not root.is_dir() or any(is_event_file(p) and p.is_file() for p in root.iterdir()):
        return None
    runs = sorted(d for d in root.iterdir() if d.is_dir() and event_files(d))
    if len(runs) < 2 or any(d.name.lower() in SPLIT_FOLDERS for d in runs):
        return None
    reads = [read_tensorboard(d) for d in runs]
    starts: list[tuple[float, float]] = []
    for read in reads:
        series = [e for e in read.events if isinstance(e, MetricSeries) and len(e.steps)]
        if not series:
            return None
        walls = [float(np.min(np.asarray(e.times))) for e in series if e.times is not None and len(e.times)]
        first_wall = min(walls, default=0.0)
        starts.append((first_wall, min(float(np.min(np.asarray(e.steps))) for e in series)))
    ordered = sorted(range(len(reads)), key=lambda i: starts[i][0])
    if all(starts[i][1] > 0 for i in ordered[1:]):
        return [reads[i] for i in ordered]
    return None


def _events(tags: dict[str, _Scalars], read: LogRead) -> list[Event]:
    events: list[Event] = []
    epoch_maps = {
        name.rsplit("/", 1)[0] if "/" in name else "": s for name, s in tags.items() if _last(name) == "epoch"
    }
    keras_epochs: set[int] = set()
    for name, s in sorted(tags.items()):
        steps = np.concatenate(s.steps)
        values = np.concatenate(s.values)
        walls = np.concatenate(s.walls)
        per = "epoch" if _is_keras_epoch_tag(name) else "step"
        epochs = None
        folder = name.rsplit("/", 1)[0] if "/" in name else ""
        if per == "epoch":
            keras_epochs.update(int(x) for x in np.unique(steps))
        elif folder in epoch_maps and _last(name) != "epoch":
            epochs = _epochs_of(steps, epoch_maps[folder])
        events.append(
            MetricSeries(  # numpy arrays as they are: a million points as Python floats costs seconds
                name=name,
                steps=cast(Sequence[int], steps),
                values=cast(Sequence[float], values),
                epochs=None if epochs is None else cast(Sequence[float], epochs),
                times=cast(Sequence[float], walls),
                per=per,
                source=str(read.path),
                t=float(walls.max()) if len(walls) else 0.0,
                pid=LOG_PID,
            )
        )
    end = max((e.t for e in events), default=0.0)
    events.extend(Epoch(epoch=e, t=end, pid=LOG_PID) for e in sorted(keras_epochs))
    return events


def _last(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def _is_keras_epoch_tag(name: str) -> bool:
    """Keras' TensorBoard callback logs `epoch_loss`, `epoch_accuracy`... with step = epoch index."""
    return _last(name).startswith("epoch_")


def _epochs_of(steps: I64, epoch_tag: _Scalars) -> NDArray[np.float64]:
    """Lightning logs an `epoch` scalar at every logging step: map each step to the epoch logged at it."""
    e_steps = np.concatenate(epoch_tag.steps)
    e_values = np.concatenate(epoch_tag.values)
    order = np.argsort(e_steps, kind="stable")
    e_steps, e_values = e_steps[order], e_values[order]
    at = np.clip(np.searchsorted(e_steps, steps, side="right") - 1, 0, len(e_steps) - 1)
    return np.floor(e_values[at]).astype(np.float64)


# -- one file ----------------------------------------------------------------------------------


def _read_file(path: Path, read: LogRead) -> dict[str, _Scalars]:
    data = path.read_bytes()
    buf = np.zeros(len(data) + _PAD, dtype=np.uint8)  # padding: gathers near the end need no clipping
    buf[: len(data)] = np.frombuffer(data, dtype=np.uint8)
    starts, lengths = _record_starts(data, buf)
    end = int(starts[-1] + _HEADER + lengths[-1] + _FOOTER) if len(starts) else 0
    if end < len(data):
        read.skipped.append(f"{path.name}: last {len(data) - end} bytes are a record cut mid-write")
    tags: dict[str, _Scalars] = {}
    fast = _fast_scalars(buf, starts, lengths, tags)
    for i in np.flatnonzero(~fast):
        start, length = int(starts[i]) + _HEADER, int(lengths[i])
        _slow_record(data[start : start + length], tags)
    return tags


def _record_starts(data: bytes, buf: U8) -> tuple[I64, I64]:
    """Offsets and payload lengths of every complete record (vectorised; sequential fallback)."""
    size = len(data)
    if size < _HEADER + _FOOTER:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    cand = np.flatnonzero(buf[_HEADER:size] == _WALL_TIME).astype(np.int64)
    cand = cand[cand + _HEADER + _FOOTER <= size]
    lengths = _gather(buf, cand, 8).view("<u8").ravel().astype(np.int64)
    ok = (lengths > 0) & (lengths < size) & (cand + _HEADER + lengths + _FOOTER <= size)
    cand, lengths = cand[ok], lengths[ok]
    crc = _gather(buf, cand + 8, 4).view("<u4").ravel()
    ok = _masked_crc32c_8(_gather(buf, cand, 8)) == crc
    cand, lengths = cand[ok], lengths[ok]
    nxt = cand + _HEADER + lengths + _FOOTER
    if len(cand) and cand[0] == 0 and np.array_equal(cand[1:], nxt[:-1]):
        return cand, lengths
    return _walk(data)


def _walk(data: bytes) -> tuple[I64, I64]:
    """Record by record, for files whose events do not all start with a wall time."""
    starts: list[int] = []
    lengths: list[int] = []
    pos, size = 0, len(data)
    while pos + _HEADER + _FOOTER <= size:
        (length,) = struct.unpack_from("<Q", data, pos)
        if pos + _HEADER + length + _FOOTER > size:
            break
        starts.append(pos)
        lengths.append(length)
        pos += _HEADER + length + _FOOTER
    return np.array(starts, dtype=np.int64), np.array(lengths, dtype=np.int64)


def _gather(buf: U8, offsets: I64, width: int) -> U8:
    """(n, width) bytes starting at each offset: one row copy each (buf is padded by `_PAD`)."""
    return np.lib.stride_tricks.sliding_window_view(buf, width)[offsets]


def _varints(buf: U8, offsets: I64) -> tuple[I64, I64]:
    """Decode a protobuf varint at each offset: (values, byte lengths); lengths are 0 where invalid."""
    first = buf[offsets]
    value = (first & 0x7F).astype(np.int64)
    length = np.ones(len(offsets), dtype=np.int64)
    long = np.flatnonzero(first >= 0x80)  # most varints here (lengths, small steps) are one byte
    if len(long):
        raw = _gather(buf, offsets[long], 10)
        more = raw >= 0x80
        size = (np.argmin(more, axis=1) + 1).astype(np.int64)
        size[more.all(axis=1)] = 0
        wide = (raw[:, 0] & 0x7F).astype(np.uint64)
        for k in range(1, int(size.max(initial=0))):
            take = np.flatnonzero(size > k)
            wide[take] |= (raw[take, k] & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        value[long] = wide.view(np.int64)
        length[long] = size
    return value, length


def _fast_scalars(buf: U8, starts: I64, lengths: I64, tags: dict[str, _Scalars]) -> NDArray[np.bool_]:
    """Decode every record laid out as one simple_value scalar; returns which records it took."""
    fast = np.zeros(len(starts), dtype=bool)
    if not len(starts):
        return fast
    s = starts + _HEADER
    end = s + lengths
    has_step = buf[s + 9] == _STEP
    step, step_len = _varints(buf, s + 10)
    step = np.where(has_step, step, 0)
    r = s + 9 + np.where(has_step, 1 + step_len, 0)
    summary_len, sl = _varints(buf, r + 1)
    v = r + 1 + sl
    value_len, vl = _varints(buf, v + 1)
    t = v + 1 + vl
    tag_len, tl = _varints(buf, t + 1)
    tag_at = t + 1 + tl
    after = tag_at + tag_len
    ok = (
        (~has_step | (step_len > 0))
        & (buf[r] == _SUMMARY)
        & (sl > 0)
        & (r + 1 + sl + summary_len == end)
        & (buf[v] == _VALUE)
        & (vl > 0)
        & (v + 1 + vl + value_len == end)
        & (buf[t] == _TAG)
        & (tl > 0)
        & (buf[after] == _SIMPLE)
        & (after + 5 == end)
    )
    idx = np.flatnonzero(ok)
    fast[idx] = True
    if not len(idx):
        return fast
    walls = _gather(buf, s[idx] + 1, 8).view("<f8").ravel()
    values = _gather(buf, after[idx] + 1, 4).view("<f4").ravel().astype(np.float64)
    steps = step[idx]
    for rows in _group_by_tag(buf, tag_at[idx], tag_len[idx]):
        first = int(tag_at[idx][rows[0]])
        tag = bytes(buf[first : first + int(tag_len[idx][rows[0]])]).decode("utf-8", errors="replace")
        tags.setdefault(tag, _Scalars()).add(steps[rows], values[rows], walls[rows])
    return fast


def _group_by_tag(buf: U8, at: I64, length: I64) -> list[I64]:
    """Row indices of each distinct tag: grouped by a 64-bit polynomial hash, then checked byte for byte."""
    width = int(length.max())
    names = _gather(buf, at, width)
    names[np.arange(width)[None, :] >= length[:, None]] = 0
    digest = length.astype(np.uint64)
    for k in range(width):
        digest = digest * np.uint64(1099511628211) + names[:, k].astype(np.uint64)
    _, inverse = np.unique(digest, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.flatnonzero(np.diff(inverse[order])) + 1
    groups: list[I64] = []
    for rows in np.split(order, bounds):
        same = (names[rows] == names[rows[0]]).all(axis=1)
        groups.append(rows[same])
        if not same.all():  # a hash collision: the other tags of this group get their own groups
            rest = rows[~same]
            groups.extend(
                rest[np.flatnonzero(_eq_rows(names[rest], names[r]))] for r in _firsts(names[rest], rest)
            )
    return groups


def _firsts(names: U8, rows: I64) -> list[int]:
    """First row of each distinct name among `rows` (slow path for hash collisions only)."""
    seen: dict[bytes, int] = {}
    for name, row in zip(names, rows, strict=True):
        seen.setdefault(name.tobytes(), int(row))
    return list(seen.values())


def _eq_rows(names: U8, row: U8) -> NDArray[np.bool_]:
    return np.asarray((names == row).all(axis=1))


def _slow_record(payload: bytes, tags: dict[str, _Scalars]) -> None:
    """Any other event: parsed with protobuf; scalar values (simple or 1-element tensors) are kept."""
    for tag, step, wall, value in _scalars_of(payload):
        tags.setdefault(tag, _Scalars()).add(
            np.array([step], dtype=np.int64), np.array([value]), np.array([wall])
        )


def _scalars_of(payload: bytes) -> Iterator[tuple[str, int, float, float]]:
    from tensorboard.compat.proto import event_pb2

    try:
        event = event_pb2.Event.FromString(payload)
    except Exception:
        return
    if not event.HasField("summary"):
        return
    for value in event.summary.value:
        kind = value.WhichOneof("value")
        if kind == "simple_value":
            yield value.tag, event.step, event.wall_time, float(value.simple_value)
        elif kind == "tensor" and value.metadata.plugin_data.plugin_name in ("scalars", ""):
            scalar = _tensor_scalar(value.tensor)
            if scalar is not None:
                yield value.tag, event.step, event.wall_time, scalar


#: TensorProto dtype enum -> numpy dtype, for the scalar types `tf.summary.scalar` writes.
_TENSOR_DTYPES = {1: "<f4", 2: "<f8", 3: "<i4", 9: "<i8", 19: "<f2"}


def _tensor_scalar(tensor: Any) -> float | None:
    """A one-element numeric TensorProto as a float, without tensor_util (which can pull in TensorFlow)."""
    for repeated in (tensor.float_val, tensor.double_val, tensor.int64_val, tensor.int_val):
        if len(repeated) == 1:
            return float(repeated[0])
    dtype = _TENSOR_DTYPES.get(tensor.dtype)
    if dtype is None or len(tensor.tensor_content) != np.dtype(dtype).itemsize:
        return None
    return float(np.frombuffer(tensor.tensor_content, dtype=dtype)[0])


# -- CRC-32C (Castagnoli), vectorised over the 8-byte length fields --------------------------------


def _crc_table() -> NDArray[np.uint32]:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(0x82F63B78), table >> 1).astype(np.uint32)
    return table


_TABLE = _crc_table()


def _masked_crc32c_8(rows: U8) -> NDArray[np.uint32]:
    """TFRecord's masked CRC-32C of each row of 8 bytes."""
    crc = np.full(len(rows), 0xFFFFFFFF, dtype=np.uint32)
    for k in range(rows.shape[1]):
        crc = _TABLE[(crc ^ rows[:, k]) & 0xFF] ^ (crc >> np.uint32(8))
    crc ^= np.uint32(0xFFFFFFFF)
    masked = ((crc >> np.uint32(15)) | (crc << np.uint32(17))) + np.uint32(_MASK_DELTA)
    return np.asarray(masked, dtype=np.uint32)
