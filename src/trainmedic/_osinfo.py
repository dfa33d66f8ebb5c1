"""The machine's facts a run records, as `platform` and `socket` give them, without either.

Every supervised run and every instrumented trainer process names its node and its OS.
On Linux `platform.platform()` runs `uname -p` in a subprocess (once per process: every
supervised run) for a processor name it then leaves out, and importing `platform` and
`socket` adds to every process's start-up. On POSIX the same strings come from
`os.uname()`, `os.confstr` and `sys` (tests compare them with `platform`'s and `socket`'s
own); elsewhere, or where a piece is missing, those modules answer.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_IMPLEMENTATIONS = {"cpython": "CPython", "pypy": "PyPy", "ironpython": "IronPython", "jython": "Jython"}


def hostname() -> str:
    """`socket.gethostname()`: on POSIX `gethostname(2)` is the kernel's `uname` node name."""
    os_uname = getattr(os, "uname", None)
    if os_uname is not None:
        return str(os_uname().nodename)
    import socket  # Windows: no os.uname

    return socket.gethostname()


def python_version() -> str:
    """`platform.python_version()`: the first word of `sys.version` ("3.11.7", "3.13.0rc1+")."""
    return sys.version.split()[0]


def python_implementation() -> str:
    name = sys.implementation.name
    return _IMPLEMENTATIONS.get(name, name)


def uname() -> tuple[str, str, str]:
    """(system, release, machine), as `platform.system()`, `.release()`, `.machine()`."""
    if hasattr(os, "uname"):
        u = os.uname()
        return u.sysname, u.release, u.machine
    import platform

    return platform.system(), platform.release(), platform.machine()


def libc() -> tuple[str, str]:
    """`platform.libc_ver()`: ("glibc", "2.36"); ("", "") where the C library does not say."""
    try:
        name, _, version = os.confstr("CS_GNU_LIBC_VERSION").partition(" ")  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        name = version = ""
    if name and version:
        return name, version
    import platform

    return platform.libc_ver()


def platform_string() -> str:
    """`platform.platform()` for Linux ("Linux-6.1.0-x86_64-with-glibc2.36"); `platform`'s
    answer elsewhere (macOS and Windows name their versions their own way)."""
    system, release, machine = uname()
    lib, version = libc()
    if (
        system != "Linux"
        or not lib
        or any(not part.isprintable() or " " in part for part in (release, machine))
    ):
        import platform

        return platform.platform()
    return f"{system}-{release}-{machine}-with-{lib}{version}"


def peak_rss_bytes() -> int:
    """This process's peak resident memory so far.

    On Linux, `VmHWM` of /proc/self/status: the high-water mark of this program's own memory.
    `ru_maxrss` is not that there: the kernel carries it across `exec`, so a process started by
    a large one (the supervisor's report process) reports its parent's size. Elsewhere
    `ru_maxrss` (bytes on macOS, KiB on other systems)."""
    try:
        for line in Path("/proc/self/status").read_bytes().splitlines():
            if line.startswith(b"VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource  # POSIX; read once at the end of a run

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)
