"""Checkpoints that survive a kill at any instant, and say when they are damaged.

nanoGPT's `torch.save(checkpoint, "ckpt.pt")` is the counter-example: a kill during
the write leaves a truncated file in place of the only good one. Here a checkpoint
only counts once it is complete (torchtitan's rule): the payload is written to a
temporary file, fsynced, renamed over its final name, and the directory fsynced;
then a small JSON manifest with the payload's CRC-32 and size is written the same
way. A checkpoint without a manifest never existed. Loading re-hashes the payload,
and `load_latest` falls back to the newest intact checkpoint, naming the damaged
ones it skipped.

Payloads are loaded with `torch.load(weights_only=True)`: a checkpoint file from
elsewhere cannot run code on load. So everything saved here is tensors, numbers,
strings, lists and dicts (RNG states included, see `rng_state`).

    manager = CheckpointManager("ckpt", keep_last=3, best_metric="val_loss")
    manager.save(state, step=120, epoch=2, metrics={"val_loss": 0.31})
    manager.save_async(state, step=130, epoch=2)  # copies, then writes on a thread
    manager.wait()                         # durable (and its error, if any, raised)
    loaded = load_latest("ckpt")           # newest intact, or None
    state = loaded.state if loaded else None
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import json
import logging
import math
import os
import pickle
import random
import re
import shutil
import signal
import sys
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import torch
from trainmedic.atomicfile import TMP_SUFFIX, atomic_writer
from trainmedic.atomicfile import fsync_dir as _fsync_dir
from trainmedic.atomicfile import temporary_path as _tmp_path
from trainmedic.envinfo._git import code_commit
from trainmedic.errors import TrainmedicError
from trainmedic.events import GuardObservation, PhaseEnd, PhaseStart
from trainmedic.instrument.channel import emit

__all__ = [
    "CheckpointError",
    "CheckpointInfo",
    "CheckpointManager",
    "CorruptCheckpointError",
    "Loaded",
    "Stager",
    "code_commit",
    "list_checkpoints",
    "load",
    "load_latest",
    "restore_rng_state",
    "rng_state",
    "save",
    "verify",
]

FORMAT = 1
# Set by `trainmedic verify-resume --kill-at write`: this process SIGKILLs itself halfway
# through its N-th checkpoint payload, a real kill at the worst moment, exactly placed.
KILL_IN_WRITE_ENV = "TRAINMEDIC_KILL_IN_WRITE"
_payload_writes = 0
_STEP_NAME = re.compile(r"^step-(\d+)$")
_CHUNK = 1 << 22
log = logging.getLogger("trainmedic.checkpoint")


class CheckpointError(TrainmedicError):
    """A checkpoint could not be written or read."""


class CorruptCheckpointError(CheckpointError):
    """A checkpoint's files do not match its manifest (truncated, bit-flipped, missing)."""


@dataclass(frozen=True, slots=True)
class CheckpointInfo:
    """What the manifest of one checkpoint says."""

    name: str  # "step-00000120" or "best"
    directory: Path
    step: int
    epoch: int
    files: Mapping[str, Mapping[str, Any]]  # relative path -> {"crc32": ..., "bytes": ...}
    metrics: Mapping[str, float] = field(default_factory=dict)
    created: float = 0.0

    @property
    def manifest(self) -> Path:
        return self.directory / f"{self.name}.json"

    @property
    def payload(self) -> Path:
        return self.directory / f"{self.name}.pt"


@dataclass(frozen=True, slots=True)
class Loaded:
    """The newest intact checkpoint's state, and the damaged ones skipped to get it."""

    state: dict[str, Any]
    info: CheckpointInfo
    skipped: tuple[tuple[str, str], ...] = ()


# --------------------------------------------------------------------------- atomic writes


class _Crc32:
    """CRC-32 (zlib, ~3 GB/s, GIL released): detects truncation and bit rot, which is its job.

    Tampering is not its job: loading with weights_only=True is what makes a hostile file
    harmless. SHA-256 here cost a third of the save throughput.
    """

    def __init__(self) -> None:
        self.value = 0

    def update(self, data: bytes) -> None:
        self.value = zlib.crc32(data, self.value)

    def hexdigest(self) -> str:
        return f"{self.value:08x}"


class _HashingWriter:
    """A file object for `torch.save` that checksums the bytes while they go to disk.

    Large chunks are checksummed by a helper thread while this thread writes them (both
    release the GIL). The chunk is a view of torch's memory, valid only during the call:
    the checksum finishes before `write` returns. A plain thread, not an executor: at
    interpreter exit (a background save finishing) executors refuse new work.
    """

    _PARALLEL_MIN = 1 << 20  # smaller writes: inline is cheaper than a hand-off

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self._crc = _Crc32()
        self.bytes = 0

    def write(self, data: bytes) -> int:
        self.bytes += len(data)
        helper = None
        if len(data) >= self._PARALLEL_MIN:
            helper = threading.Thread(target=self._crc.update, args=(data,), name="trainmedic-crc")
            try:
                helper.start()
            except RuntimeError:  # no new threads (interpreter shutting down): inline
                helper = None
        if helper is None:
            self._crc.update(data)
            return self._file.write(data)
        try:
            return self._file.write(data)
        finally:
            helper.join()

    def flush(self) -> None:
        self._file.flush()

    def hexdigest(self) -> str:
        return self._crc.hexdigest()


def _write_atomic(path: Path, write: Any, *, durable: bool = True, sync_dir: bool = True) -> dict[str, Any]:
    """Write `path` through a temporary file: a kill or a full disk leaves the old file intact.

    `durable` adds the fsyncs that make it survive a power loss or kernel crash too; a
    killed process needs none (its written pages are the kernel's already).
    """
    with atomic_writer(path, durable=durable, sync_dir=sync_dir) as raw:
        writer = _HashingWriter(raw)
        write(writer)
    return {"crc32": writer.hexdigest(), "bytes": writer.bytes}


def _write_json_atomic(path: Path, data: Mapping[str, Any], *, durable: bool = True) -> None:
    body = json.dumps(data, indent=1, sort_keys=True).encode()
    _write_atomic(path, lambda f: f.write(body), durable=durable)


def _hash_file(path: Path) -> tuple[str, int]:
    digest = _Crc32()
    size = 0
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


# --------------------------------------------------------------------------- one checkpoint


def save(
    state: Mapping[str, Any],
    directory: str | os.PathLike[str],
    name: str,
    *,
    step: int,
    epoch: int,
    metrics: Mapping[str, float] | None = None,
    extra_files: Mapping[str, Mapping[str, Any]] | None = None,
    durable: bool = True,
) -> CheckpointInfo:
    """Write `<directory>/<name>.pt` and then its manifest `<name>.json`, both atomically.

    With `durable=False` the fsyncs are skipped: still safe against a killed process; after
    a power loss the newest checkpoints may be damaged, which loading detects (checksum)
    and skips.

    `extra_files` lists files already written under `directory` (e.g. the shards of a
    torch.distributed.checkpoint) that belong to this checkpoint and are verified with it.
    """
    folder = Path(directory)
    payload = folder / f"{name}.pt"
    try:
        target: Callable[[Any], Any] = _KillMidway if _kill_requested() else (lambda f: f)
        # One fsync for the payload's bytes and one for the directory (both renames) is
        # enough: a manifest that outlives a power loss without its payload fails
        # verification, and loading falls back to the previous checkpoint.
        entry = _write_atomic(
            payload, lambda f: _serialize(dict(state), target(f)), durable=durable, sync_dir=False
        )
        files = {payload.name: entry, **(extra_files or {})}
        info = CheckpointInfo(
            name=name,
            directory=folder,
            step=step,
            epoch=epoch,
            files=files,
            metrics=dict(metrics or {}),
            created=time.time(),
        )
        _write_json_atomic(info.manifest, _manifest_dict(info), durable=False)
        if durable:
            _fsync_dir(folder)
    except (OSError, RuntimeError) as exc:  # torch.save wraps a failed write in a RuntimeError
        cause = _os_error_in(exc)
        if cause is None:
            raise
        raise CheckpointError(f"could not write checkpoint {payload}: {cause.strerror or cause}") from exc
    return info


def _serialize(obj: dict[str, Any], file: Any) -> None:
    """`torch.save(obj, file)` without torch's own CRC-32 of every zip record.

    torch.load never checks those CRCs (a bit-flipped file loads silently), and this
    module checksums the whole file and verifies it on every load; computing them cost
    ~30 % of a 200 MB save here. `torch.serialization.set_crc32_options(False)` would do
    it for the whole process, other threads' `torch.save` included; so the writer is
    built here with the flag off, through torch's internals. Those are private: they are
    probed once (a round trip through memory) and plain torch.save is used if they moved.
    """
    if _private_writer_works():
        from torch import serialization

        writer = torch._C.PyTorchFileWriter(file, False, serialization._get_storage_alignment())
        try:
            serialization._save(obj, writer, pickle, serialization.DEFAULT_PROTOCOL, False)  # type: ignore[no-untyped-call]
        finally:  # as torch.save's context manager does, error or not (else its destructor aborts)
            writer.write_end_of_file()
        file.flush()
    else:
        torch.save(obj, file)


@functools.cache
def _private_writer_works() -> bool:
    from torch import serialization

    weights = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    buffer = io.BytesIO()
    try:
        writer = torch._C.PyTorchFileWriter(buffer, False, serialization._get_storage_alignment())
        serialization._save({"w": weights, "n": 1}, writer, pickle, serialization.DEFAULT_PROTOCOL, False)  # type: ignore[no-untyped-call]
        writer.write_end_of_file()
        buffer.seek(0)
        back = torch.load(buffer, weights_only=True)
        return bool(back["n"] == 1 and torch.equal(back["w"], weights))
    except Exception:  # any change in torch's internals: the public path
        return False


def _kill_requested() -> bool:
    global _payload_writes
    _payload_writes += 1
    return os.environ.get(KILL_IN_WRITE_ENV) == str(_payload_writes)


class _KillMidway:
    """Passes writes through; on the second one, writes half of it and SIGKILLs this process."""

    def __init__(self, file: Any) -> None:
        self._file = file
        self._calls = 0

    def write(self, data: bytes) -> int:
        self._calls += 1
        if self._calls == 2:
            self._file.write(data[: max(len(data) // 2, 1)])
            self._file.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        return int(self._file.write(data))

    def flush(self) -> None:
        self._file.flush()


def _os_error_in(exc: BaseException | None) -> OSError | None:
    """The OSError (disk full, file too large, permission) behind an exception, if any."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, OSError):
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def _manifest_dict(info: CheckpointInfo) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "name": info.name,
        "step": info.step,
        "epoch": info.epoch,
        "files": {k: dict(v) for k, v in info.files.items()},
        "metrics": dict(info.metrics),
        "created": info.created,
    }


def _read_manifest(manifest: Path) -> CheckpointInfo:
    try:
        data = json.loads(manifest.read_text())
        return CheckpointInfo(
            name=str(data["name"]),
            directory=manifest.parent,
            step=int(data["step"]),
            epoch=int(data["epoch"]),
            files=dict(data["files"]),
            metrics=dict(data.get("metrics") or {}),
            created=float(data.get("created") or 0.0),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CorruptCheckpointError(f"{manifest}: unreadable manifest ({exc})") from exc


def verify(manifest_or_payload: str | os.PathLike[str]) -> CheckpointInfo:
    """Check every file of a checkpoint against its manifest; raise CorruptCheckpointError if not."""
    path = Path(manifest_or_payload)
    manifest = path.with_suffix(".json") if path.suffix == ".pt" else path
    if not manifest.exists():
        raise CorruptCheckpointError(f"{manifest}: no manifest (the write never completed)")
    info = _read_manifest(manifest)
    for rel, expected in info.files.items():
        file = info.directory / rel
        if not file.is_file():
            raise CorruptCheckpointError(f"{file}: missing")
        size = file.stat().st_size
        if size != int(expected["bytes"]):
            raise CorruptCheckpointError(
                f"{file}: {size} bytes, manifest says {expected['bytes']} (truncated?)"
            )
        digest, _ = _hash_file(file)
        if digest != expected.get("crc32"):
            raise CorruptCheckpointError(f"{file}: checksum mismatch (the file was altered or damaged)")
    return info


def load(
    manifest_or_payload: str | os.PathLike[str], *, map_location: Any = "cpu"
) -> tuple[dict[str, Any], CheckpointInfo]:
    """Verify, then load with `weights_only=True` (no pickle code runs)."""
    info = verify(manifest_or_payload)
    try:
        state = torch.load(info.payload, map_location=map_location, weights_only=True)
    except Exception as exc:  # a corrupt zip that still hashes right cannot happen; a foreign file can
        raise CorruptCheckpointError(f"{info.payload}: cannot be loaded safely ({exc})") from exc
    if not isinstance(state, dict):
        raise CorruptCheckpointError(f"{info.payload}: expected a dict, found {type(state).__name__}")
    return state, info


def list_checkpoints(directory: str | os.PathLike[str]) -> list[Path]:
    """Manifests in `directory`, newest first (by step, then write time; `best` after a tie)."""
    folder = Path(directory)
    if not folder.is_dir():
        return []
    found: list[tuple[int, float, int, Path]] = []
    for manifest in folder.glob("*.json"):
        try:
            data = json.loads(manifest.read_text())
            step, created = int(data["step"]), float(data.get("created") or 0.0)
        except (OSError, ValueError, KeyError, TypeError):
            step, created = sys.maxsize, 0.0  # may be the newest: tried first, reported as damaged
        found.append((step, created, 0 if _STEP_NAME.match(manifest.stem) else -1, manifest))
    found.sort(key=lambda item: item[:3], reverse=True)
    return [item[3] for item in found]


def load_latest(directory: str | os.PathLike[str], *, map_location: Any = "cpu") -> Loaded | None:
    """The newest intact checkpoint in `directory`; damaged ones are logged, reported, skipped."""
    skipped: list[tuple[str, str]] = []
    for manifest in list_checkpoints(directory):
        try:
            state, info = load(manifest, map_location=map_location)
        except CorruptCheckpointError as exc:
            _report_corrupt(manifest, str(exc))
            skipped.append((str(manifest), str(exc)))
            continue
        return Loaded(state=state, info=info, skipped=tuple(skipped))
    return None


def _report_corrupt(manifest: Path, reason: str) -> None:
    log.warning("trainmedic: skipping damaged checkpoint %s: %s", manifest.name, reason)
    emit(GuardObservation(check="checkpoint_corrupt", data={"manifest": str(manifest), "reason": reason}))


# --------------------------------------------------------------------------- staging for async saves


class Stager:
    """Copies a state tree into CPU buffers kept from one save to the next.

    A fresh 200 MB clone costs ~5x a copy into memory already mapped (the first touch of
    every page faults), so the buffers of the previous save are reused when a tensor at
    the same place in the tree has the same shape and dtype. The cost: one CPU copy of the
    state stays allocated for the run. Tensors that are views of the same memory (tied
    weights) are staged once, keeping their sharing. GPU tensors go to pinned buffers.
    """

    def __init__(self) -> None:
        self._buffers: dict[tuple[Any, ...], torch.Tensor] = {}

    def stage(self, state: Mapping[str, Any]) -> dict[str, Any]:
        seen: dict[tuple[Any, ...], torch.Tensor] = {}
        copied_from_gpu = [False]
        staged = self._copy(state, (), seen, copied_from_gpu)
        if copied_from_gpu[0]:
            torch.cuda.synchronize()  # the non-blocking copies have landed
        assert isinstance(staged, dict)
        return staged

    def _copy(
        self, value: Any, where: tuple[Any, ...], seen: dict[tuple[Any, ...], torch.Tensor], gpu: list[bool]
    ) -> Any:
        if isinstance(value, torch.Tensor):
            return self._tensor(value, where, seen, gpu)
        if isinstance(value, Mapping):
            items = {k: self._copy(v, (*where, k), seen, gpu) for k, v in value.items()}
            return OrderedDict(items) if isinstance(value, OrderedDict) else items
        if isinstance(value, list):
            return [self._copy(v, (*where, i), seen, gpu) for i, v in enumerate(value)]
        if type(value) is tuple:
            return tuple(self._copy(v, (*where, i), seen, gpu) for i, v in enumerate(value))
        if value is None or isinstance(value, str | bytes | int | float | bool | torch.dtype | torch.device):
            return value
        return copy.deepcopy(value)

    def _tensor(
        self,
        tensor: torch.Tensor,
        where: tuple[Any, ...],
        seen: dict[tuple[Any, ...], torch.Tensor],
        gpu: list[bool],
    ) -> torch.Tensor:
        tensor = tensor.detach()
        if tensor.layout != torch.strided:
            return tensor.to("cpu", copy=True)
        alias = (tensor.device, tensor.data_ptr(), tensor.dtype, tuple(tensor.shape), tensor.stride())
        if alias in seen:
            return seen[alias]
        cuda = tensor.device.type == "cuda"  # other devices: a plain (blocking) copy
        buffer = self._buffers.get(where)
        if buffer is None or buffer.shape != tensor.shape or buffer.dtype != tensor.dtype:
            buffer = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=cuda)
            self._buffers[where] = buffer
        buffer.copy_(tensor, non_blocking=cuda)
        gpu[0] = gpu[0] or cuda
        seen[alias] = buffer
        return buffer


# --------------------------------------------------------------------------- last / best / keep-N


class CheckpointManager:
    """`step-N` checkpoints with keep-N rotation, plus a separate `best` by one metric.

    Only one process (rank 0) should own a manager. Cleanup never fails a run: a file
    that cannot be removed is left for the next rotation.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        keep_last: int = 3,
        best_metric: str | None = None,
        best_mode: str = "min",
        durable: bool = True,
    ) -> None:
        if keep_last < 1:
            raise ValueError(f"keep_last must be at least 1, got {keep_last}")
        if best_mode not in ("min", "max"):
            raise ValueError(f"best_mode must be 'min' or 'max', got {best_mode!r}")
        self.directory = Path(directory)
        self.keep_last = keep_last
        self.best_metric = best_metric
        self.best_mode = best_mode
        self.durable = durable
        self._cleanup: threading.Thread | None = None
        self._writer: threading.Thread | None = None  # the background save in flight
        self._failure: BaseException | None = None  # what the last background save raised
        self._stager = Stager()
        self.directory.mkdir(parents=True, exist_ok=True)
        if not os.access(self.directory, os.W_OK | os.X_OK):
            raise PermissionError(f"checkpoint_dir {self.directory} is not writable")
        self.best_value = self._read_best_value()
        self._remove_leftovers()

    def save(
        self,
        state: Mapping[str, Any],
        *,
        step: int,
        epoch: int,
        metrics: Mapping[str, float] | None = None,
        extra_files: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> CheckpointInfo:
        """Write `step-<step>` now; link it as `best` if `best_metric` improved; rotate old ones.

        Sharded checkpoints (`extra_files`) get no `best` link: their shards rotate away.
        """
        self.wait()  # a background save in flight finishes first: saves land in order
        emit(PhaseStart(phase="checkpoint", epoch=epoch, step=step))
        try:
            return self._write(state, step=step, epoch=epoch, metrics=metrics, extra_files=extra_files)
        finally:
            emit(PhaseEnd(phase="checkpoint", epoch=epoch, step=step))

    def save_async(
        self,
        state: Mapping[str, Any],
        *,
        step: int,
        epoch: int,
        metrics: Mapping[str, float] | None = None,
    ) -> None:
        """Copy `state` to CPU memory now; serialize, write, fsync and rename it on a thread.

        The caller is blocked only for the copy (into buffers reused from the previous save,
        so no page faults: a memcpy). Training may then change the model at once. One save
        is in flight at a time: this first waits for the previous one and raises its error,
        if it had one. `wait()` (fit calls it at its end and on errors) makes everything
        durable; the writer thread is not a daemon, so the interpreter also waits for it at
        exit. A kill mid-write leaves the previous checkpoints intact: the new one counts
        only once its manifest is renamed into place, after the payload's fsync.
        """
        self.wait()
        emit(PhaseStart(phase="checkpoint", epoch=epoch, step=step))
        try:
            staged = self._stager.stage(state)
        finally:
            emit(PhaseEnd(phase="checkpoint", epoch=epoch, step=step))
        self._writer = threading.Thread(
            target=self._write_in_background,
            args=(staged, step, epoch, dict(metrics or {})),
            name=f"trainmedic-checkpoint-{step}",
        )
        self._writer.start()

    def _write_in_background(
        self, staged: Mapping[str, Any], step: int, epoch: int, metrics: Mapping[str, float]
    ) -> None:
        try:
            self._write(staged, step=step, epoch=epoch, metrics=metrics)
        except BaseException as exc:  # handed to the training thread by wait()
            self._failure = exc

    def _write(
        self,
        state: Mapping[str, Any],
        *,
        step: int,
        epoch: int,
        metrics: Mapping[str, float] | None,
        extra_files: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> CheckpointInfo:
        info = save(
            state,
            self.directory,
            f"step-{step:08d}",
            step=step,
            epoch=epoch,
            metrics=metrics,
            extra_files=extra_files,
            durable=self.durable,
        )
        if not extra_files and self._improves(metrics):
            self._link_best(info)
        self._rotate()
        return info

    @property
    def pending(self) -> bool:
        """Whether a background save is still being written."""
        return self._writer is not None and self._writer.is_alive()

    def wait(self) -> None:
        """Until the background save (if any) is durable and rotated-out files are removed.

        Raises what the background save raised (e.g. CheckpointError: disk full), once.
        """
        if self._writer is not None:
            self._writer.join()
            self._writer = None
        self._wait_cleanup()
        failure, self._failure = self._failure, None
        if failure is not None:
            raise failure

    def _improves(self, metrics: Mapping[str, float] | None) -> bool:
        if self.best_metric is None or not metrics or self.best_metric not in metrics:
            return False
        value = float(metrics[self.best_metric])
        if math.isnan(value):  # NaN never becomes best
            return False
        if self.best_value is None:
            return True
        return value < self.best_value if self.best_mode == "min" else value > self.best_value

    def _link_best(self, info: CheckpointInfo) -> None:
        """`best.pt` is a hard link to the step file (no second write), replaced atomically."""
        best = self.directory / "best.pt"
        tmp = _tmp_path(best)
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        try:
            os.link(info.payload, tmp)
        except OSError:  # a filesystem without hard links
            _write_atomic(tmp, lambda f: f.write(info.payload.read_bytes()))
        tmp.replace(best)
        if self.durable:
            _fsync_dir(self.directory)
        files = dict(info.files)
        files["best.pt"] = files.pop(info.payload.name)
        best_info = CheckpointInfo(
            name="best",
            directory=self.directory,
            step=info.step,
            epoch=info.epoch,
            files=files,
            metrics=info.metrics,
            created=info.created,
        )
        _write_json_atomic(best_info.manifest, _manifest_dict(best_info), durable=self.durable)
        assert self.best_metric is not None
        self.best_value = float(info.metrics[self.best_metric])

    def _read_best_value(self) -> float | None:
        manifest = self.directory / "best.json"
        if self.best_metric is None or not manifest.exists():
            return None
        with contextlib.suppress(CorruptCheckpointError, KeyError, ValueError, TypeError):
            return float(_read_manifest(manifest).metrics[self.best_metric])
        return None

    def _rotate(self) -> None:
        """Old checkpoints stop counting at once (manifest removed); their bytes go in the background.

        Freeing a large file takes as long as writing a good part of it; the training
        loop need not wait for that.
        """
        steps = [m for m in list_checkpoints(self.directory) if _STEP_NAME.match(m.stem)]
        doomed: list[Path] = []
        for manifest in steps[self.keep_last :]:
            with contextlib.suppress(OSError):
                manifest.unlink()  # first: a half-removed checkpoint must never look complete
                doomed += [manifest.with_suffix(".pt"), manifest.with_suffix(".dcp")]
        if doomed:
            self._wait_cleanup()
            self._cleanup = threading.Thread(target=_remove, args=(doomed,), daemon=True)
            self._cleanup.start()

    def _wait_cleanup(self) -> None:
        """Until the removal of rotated-out checkpoints has finished."""
        if self._cleanup is not None:
            self._cleanup.join()
            self._cleanup = None

    def _remove_leftovers(self) -> None:
        """Temporary files of killed writes, and payloads whose manifest never landed."""
        for path in self.directory.glob(f".*{TMP_SUFFIX}"):
            with contextlib.suppress(OSError):
                path.unlink()
        for payload in self.directory.glob("step-*.pt"):
            if not payload.with_suffix(".json").exists():
                with contextlib.suppress(OSError):
                    payload.unlink()
        for shards in self.directory.glob("step-*.dcp"):
            if not shards.with_suffix(".json").exists():
                shutil.rmtree(shards, ignore_errors=True)


def _remove(paths: list[Path]) -> None:
    for path in paths:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                path.unlink()


# --------------------------------------------------------------------------- RNG and provenance


def rng_state() -> dict[str, Any]:
    """Every global RNG a training step may draw from, in a `weights_only`-loadable form."""
    import numpy as np

    np_state = np.random.get_state(legacy=False)
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": {
            "bit_generator": np_state["bit_generator"],
            "key": torch.from_numpy(np_state["state"]["key"].astype(np.int64)),
            "pos": int(np_state["state"]["pos"]),
            "has_gauss": int(np_state["has_gauss"]),
            "gauss": float(np_state["gauss"]),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: Mapping[str, Any]) -> None:
    """Inverse of `rng_state` (CUDA states are restored only where CUDA is present)."""
    import numpy as np

    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    np_state = state["numpy"]
    np.random.set_state(
        {
            "bit_generator": np_state["bit_generator"],
            "state": {"key": np_state["key"].numpy().astype(np.uint32), "pos": np_state["pos"]},
            "has_gauss": np_state["has_gauss"],
            "gauss": np_state["gauss"],
        }
    )
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
