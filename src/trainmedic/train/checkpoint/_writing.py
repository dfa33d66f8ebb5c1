"""Checkpoint files that are complete or absent, checksummed while they are written.

A payload is written to a temporary file, fsynced, and renamed over its final name
(`write_atomic`); its CRC-32 and size are computed on the way to disk, for the
manifest. `serialize` is `torch.save` without torch's own per-record CRCs (this
module's checksum covers the whole file). `KILL_IN_WRITE_ENV` is the test hook of
`trainmedic verify-resume --kill-at write` (`kill_requested`, `KillMidway`).
"""

from __future__ import annotations

import functools
import io
import json
import os
import pickle
import signal
import threading
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

import torch
from trainmedic.atomicfile import atomic_writer

# Set by `trainmedic verify-resume --kill-at write`: this process SIGKILLs itself halfway
# through its N-th checkpoint payload, a real kill at the worst moment, exactly placed.
KILL_IN_WRITE_ENV = "TRAINMEDIC_KILL_IN_WRITE"
_payload_writes = 0
_CHUNK = 1 << 22


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


class HashingWriter:
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


def write_atomic(path: Path, write: Any, *, durable: bool = True, sync_dir: bool = True) -> dict[str, Any]:
    """Write `path` through a temporary file: a kill or a full disk leaves the old file intact.

    `durable` adds the fsyncs that make it survive a power loss or kernel crash too; a
    killed process needs none (its written pages are the kernel's already).
    """
    with atomic_writer(path, durable=durable, sync_dir=sync_dir) as raw:
        writer = HashingWriter(raw)
        write(writer)
    return {"crc32": writer.hexdigest(), "bytes": writer.bytes}


def write_json_atomic(path: Path, data: Mapping[str, Any], *, durable: bool = True) -> None:
    body = json.dumps(data, indent=1, sort_keys=True).encode()
    write_atomic(path, lambda f: f.write(body), durable=durable)


def hash_file(path: Path) -> tuple[str, int]:
    digest = _Crc32()
    size = 0
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def serialize(obj: dict[str, Any], file: Any) -> None:
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


def kill_requested() -> bool:
    global _payload_writes
    _payload_writes += 1
    return os.environ.get(KILL_IN_WRITE_ENV) == str(_payload_writes)


class KillMidway:
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


def os_error_in(exc: BaseException | None) -> OSError | None:
    """The OSError (disk full, file too large, permission) behind an exception, if any."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, OSError):
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None
