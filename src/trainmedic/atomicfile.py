"""Write a file so that a reader never sees half of it: the one atomic writer.

The bytes go to a temporary file in the target's folder, which then replaces the
target in one rename: a crash, a full disk or a bad value mid-way leaves the old
file (or none), never a truncated one. Run-folder JSON, reports and contracts need
only that; checkpoints ask for `durable=True` too, which adds the fsyncs (the file's
bytes before the rename, the folder after it) that make the new file survive a power
loss or a kernel crash, not just a killed process.

The temporary name is made from the process and thread, not with `tempfile`: one
writer per process and thread at a time is all these files have, and it ends in
`TMP_SUFFIX`, so whoever owns a folder can remove the leftovers of killed writers.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

TMP_SUFFIX = ".tmp"


def temporary_path(target: Path) -> Path:
    """The hidden name `target` is written under before its rename, in the same folder."""
    return target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}{TMP_SUFFIX}")


@contextlib.contextmanager
def atomic_writer(target: Path, *, durable: bool = False, sync_dir: bool = True) -> Iterator[BinaryIO]:
    """A binary file that replaces `target` (mode 0644 less the umask) when the block ends
    without an exception; on one, the temporary file is removed and `target` is untouched.

    `durable` fsyncs the bytes before the rename and, unless `sync_dir` is False (the caller
    syncs the folder once after several renames), the folder after it.
    """
    temporary = temporary_path(target)
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        with os.fdopen(fd, "wb") as out:
            yield out
            out.flush()
            if durable:
                os.fsync(out.fileno())
        temporary.replace(target)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    if durable and sync_dir:
        fsync_dir(target.parent)


def write_text_atomic(target: Path, text: str) -> None:
    """Replace `target` with `text` (UTF-8) in one rename."""
    with atomic_writer(target) as out:
        out.write(text.encode("utf-8"))


def fsync_dir(directory: Path) -> None:
    """Make a rename durable: without it a power loss can forget the new directory entry."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
