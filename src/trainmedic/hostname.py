"""The machine's name, as `socket.gethostname()` gives it, without importing `socket`.

Every supervised run and every instrumented trainer process names its node; on
POSIX `gethostname(2)` is the kernel's `uname` node name, which `os.uname()` reads
directly, while importing `socket` costs ~5 ms of start-up in each process.
"""

from __future__ import annotations

import os


def hostname() -> str:
    uname = getattr(os, "uname", None)
    if uname is not None:
        return str(uname().nodename)
    import socket  # Windows: no os.uname

    return socket.gethostname()
