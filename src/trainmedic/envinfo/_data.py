"""Content hashes of data files and folders (`trainmedic env --data`)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trainmedic.errors import UsageError

_CHUNK = 1 << 20


def hash_data(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Content hash of a file or folder (streaming SHA-256; a folder hashes its sorted entries)."""
    target = Path(path)
    if not target.exists():
        raise UsageError(f"--data {target}: no such file or directory")
    if target.is_file():
        size = target.stat().st_size
        return {
            "path": str(target),
            "kind": "file",
            "files": 1,
            "bytes": size,
            "sha256": _file_sha256(target),
        }
    import hashlib

    digest = hashlib.sha256()
    files = 0
    total = 0
    for file in _walk_sorted(target):
        size = file.stat().st_size
        relative = file.relative_to(target).as_posix()
        digest.update(f"{relative}\0{size}\0{_file_sha256(file)}\n".encode())
        files += 1
        total += size
    return {
        "path": str(target),
        "kind": "folder",
        "files": files,
        "bytes": total,
        "sha256": digest.hexdigest(),
    }


def _walk_sorted(root: Path) -> Iterable[Path]:
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            file = Path(folder) / name
            if file.is_file():
                yield file


def _file_sha256(path: Path) -> str:
    import hashlib  # hashing data is `env --data`'s job: a supervised run does not import it

    digest = hashlib.sha256()
    with path.open("rb") as handle:
        buffer = bytearray(_CHUNK)
        view = memoryview(buffer)
        while True:
            n = handle.readinto(buffer)
            if not n:
                break
            digest.update(view[:n])
    return digest.hexdigest()
