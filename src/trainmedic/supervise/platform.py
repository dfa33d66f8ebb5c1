"""The POSIX-only parts of supervision, behind one small layer.

Everything else in `supervise/` uses psutil and works on Windows too. What
only POSIX (or only Linux) has lives here, with a no-op or a portable fallback:
child subreaper (Linux), process groups, signal names, the 128+N exit-status
convention, the pty that stands in for the user's terminal.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from collections.abc import Callable

IS_LINUX = sys.platform.startswith("linux")
IS_WINDOWS = sys.platform == "win32"
IS_POSIX = os.name == "posix"
_PR_SET_CHILD_SUBREAPER = 36

# The graceful stop sequence: interrupt (KeyboardInterrupt in Python), terminate, kill.
SIGINT = int(signal.SIGINT)
SIGTERM = int(signal.SIGTERM)
SIGKILL = int(getattr(signal, "SIGKILL", signal.SIGTERM))
ESCALATION: tuple[int, ...] = (SIGINT, SIGTERM, SIGKILL)
# Signals that ask the supervised run to stop (the others are passed on as they are).
STOP_SIGNALS: frozenset[int] = frozenset(
    int(getattr(signal, name)) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


def become_subreaper() -> bool:
    """Make this process the child subreaper (Linux): orphaned grandchildren are re-parented
    to us, not to init, so a trainer whose launcher died stays visible and stoppable."""
    if not IS_LINUX:
        return False
    try:
        # The interpreter's own symbols include libc's: `ctypes.util.find_library("c")` would
        # run `ldconfig -p` in a subprocess (~0.1 s of CPU on every run) to find the same library.
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def exit_status(returncode: int) -> int:
    """Popen's returncode as a shell reports it: -N (killed by signal N) becomes 128+N."""
    return 128 - returncode if returncode < 0 else returncode


def signal_of(returncode: int) -> int | None:
    """The signal that killed a child (Popen returncode -N), else None."""
    return -returncode if returncode < 0 else None


def child_start_kwargs(in_child: Callable[[], None] | None = None) -> dict[str, object]:
    """Popen arguments that start the child in its own process group, so a Ctrl-C at the
    terminal reaches only the supervisor, which forwards it once, gracefully; `in_child`
    runs in the child before exec (joining the memory cgroup)."""
    if IS_WINDOWS:
        return {"creationflags": 0x00000200}  # CREATE_NEW_PROCESS_GROUP
    if sys.version_info >= (3, 11):
        return {"process_group": 0, "preexec_fn": in_child}

    def setup() -> None:  # Python 3.10 has no process_group argument
        os.setpgid(0, 0)
        if in_child is not None:
            in_child()

    return {"preexec_fn": setup}


def send_signal(pid: int, signum: int) -> bool:
    """Send a signal; False when the process is already gone. Windows maps all to terminate."""
    try:
        if IS_WINDOWS and signum != SIGINT:
            os.kill(pid, signal.SIGTERM)
        else:
            os.kill(pid, signum)
    except (ProcessLookupError, PermissionError, OSError):
        return False
    return True


def reap_zombie(pid: int) -> None:
    """Collect the exit status of a re-parented child so it does not stay a zombie."""
    if IS_WINDOWS:
        return
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def forwardable_signals() -> list[int]:
    """Signals a scheduler or a user sends to stop a job; the supervisor forwards them."""
    names = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
    return [int(getattr(signal, n)) for n in names if hasattr(signal, n)]


def terminal_for_child(fd: int) -> tuple[int, int] | None:
    """A pty (our end, the child's end) to stand in for `fd` when it is a terminal, else None.

    A trainer whose stdout is a terminal line-buffers it; behind a pipe it block-buffers.
    Its output passes through us either way, so where ours goes to a terminal the child
    gets a terminal too: of the same size, and without output processing (the bytes reach
    output.log as written; the user's terminal still translates `\\n` when we echo them).
    POSIX only; None where `fd` is not a terminal or no pty can be had."""
    if IS_WINDOWS or not os.isatty(fd):
        return None
    try:
        import fcntl
        import termios

        ours, child = os.openpty()
    except (ImportError, OSError):
        return None
    try:
        attrs = termios.tcgetattr(child)
        attrs[1] &= ~termios.OPOST
        termios.tcsetattr(child, termios.TCSANOW, attrs)
        with contextlib.suppress(OSError):
            size = fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8)
            fcntl.ioctl(child, termios.TIOCSWINSZ, size)
    except (OSError, termios.error):
        os.close(ours)
        os.close(child)
        return None
    return ours, child
