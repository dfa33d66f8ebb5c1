"""One checkpoint: its payload, its manifest, and how both are verified and loaded.

A checkpoint counts only once its manifest (the payload's CRC-32 and size) is in
place; loading re-hashes every file the manifest lists, and `load_latest` falls
back to the newest intact checkpoint, naming the damaged ones it skipped.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from trainmedic.atomicfile import fsync_dir as _fsync_dir
from trainmedic.errors import TrainmedicError
from trainmedic.events import GuardObservation
from trainmedic.instrument.channel import emit
from trainmedic.train.checkpoint._writing import (
    KillMidway,
    hash_file,
    kill_requested,
    os_error_in,
    serialize,
    write_atomic,
    write_json_atomic,
)

FORMAT = 1
STEP_NAME = re.compile(r"^step-(\d+)$")
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
        target: Callable[[Any], Any] = KillMidway if kill_requested() else (lambda f: f)
        # One fsync for the payload's bytes and one for the directory (both renames) is
        # enough: a manifest that outlives a power loss without its payload fails
        # verification, and loading falls back to the previous checkpoint.
        entry = write_atomic(
            payload, lambda f: serialize(dict(state), target(f)), durable=durable, sync_dir=False
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
        write_json_atomic(info.manifest, manifest_dict(info), durable=False)
        if durable:
            _fsync_dir(folder)
    except (OSError, RuntimeError) as exc:  # torch.save wraps a failed write in a RuntimeError
        cause = os_error_in(exc)
        if cause is None:
            raise
        raise CheckpointError(f"could not write checkpoint {payload}: {cause.strerror or cause}") from exc
    return info


def manifest_dict(info: CheckpointInfo) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "name": info.name,
        "step": info.step,
        "epoch": info.epoch,
        "files": {k: dict(v) for k, v in info.files.items()},
        "metrics": dict(info.metrics),
        "created": info.created,
    }


def read_manifest(manifest: Path) -> CheckpointInfo:
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
    info = read_manifest(manifest)
    for rel, expected in info.files.items():
        file = info.directory / rel
        if not file.is_file():
            raise CorruptCheckpointError(f"{file}: missing")
        size = file.stat().st_size
        if size != int(expected["bytes"]):
            raise CorruptCheckpointError(
                f"{file}: {size} bytes, manifest says {expected['bytes']} (truncated?)"
            )
        digest, _ = hash_file(file)
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
        found.append((step, created, 0 if STEP_NAME.match(manifest.stem) else -1, manifest))
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
