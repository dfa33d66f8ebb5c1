"""Every thread's Python stack of a live process, with py-spy (no code change, no restart).

py-spy reads the interpreter's memory from outside, so it works on a process
that is deadlocked and would never run a signal handler. It needs ptrace rights
(root, or the same user with ptrace_scope 0).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_TIMEOUT_S = 30.0


def py_spy_path() -> str | None:
    beside = Path(sys.executable).with_name("py-spy")
    if beside.exists():
        return str(beside)
    import shutil  # a hang only: shutil also loads bz2 and lzma

    return shutil.which("py-spy")


def dump_stacks(pids: list[int]) -> dict[str, str]:
    """pid -> py-spy's dump of every thread (or the reason there is none)."""
    tool = py_spy_path()
    stacks: dict[str, str] = {}
    for pid in pids:
        if tool is None:
            stacks[str(pid)] = "py-spy not found: pip install py-spy to get the stacks of a hung run"
            continue
        try:
            done = subprocess.run(
                [tool, "dump", "--pid", str(pid)],
                capture_output=True,
                text=True,
                timeout=_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            stacks[str(pid)] = f"py-spy dump failed: {exc}"
            continue
        text = done.stdout.strip() or done.stderr.strip()
        stacks[str(pid)] = text if done.returncode == 0 else f"py-spy dump failed: {text}"
    return stacks
