"""Write a text file so that a reader never sees half of it.

The text goes to a temporary file in the target's folder, which then replaces the
target in one rename: a crash, a full disk or a bad value mid-way leaves the old
file (or none), never a truncated one. The temporary name is made from the process
and thread, not with `tempfile`, whose import (with `random`) is a few ms of every
supervised run's start-up for nothing: one writer per process and thread at a time
is all these files have.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path


def write_text_atomic(target: Path, text: str) -> None:
    """Replace `target` with `text` (UTF-8, mode 0644 less the umask) in one rename."""
    temporary = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        temporary.replace(target)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
