"""What the boot instrumentation does in a supervised process that is an ipykernel.

1. The kernel follows its supervisor: ipykernel exits when its parent changes if it was told
   its parent's PID (JPY_PARENT_PID, which Jupyter sets to its own PID; the kernel's parent
   is the supervisor). Without this, a supervisor that Jupyter kills with SIGKILL leaves the
   kernel running, holding its ports.
2. Once ipykernel has made its shell, the cells are recorded (`cells.attach`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import PurePath
from types import ModuleType

from trainmedic.instrument import hooks

KERNEL_MODULES = ("ipykernel_launcher", "ipykernel")


def is_kernel(argv: Sequence[str]) -> bool:
    """`python -m ipykernel_launcher ...` / `python -m ipykernel ...` / `.../ipykernel_launcher.py`."""
    head = list(argv[:4])
    for i, arg in enumerate(head):
        if arg == "-m" and i + 1 < len(argv) and argv[i + 1] in KERNEL_MODULES:
            return True
        if PurePath(arg).name == "ipykernel_launcher.py":
            return True
    return False


def arm() -> None:
    os.environ["JPY_PARENT_PID"] = str(os.getppid())
    hooks.when_imported("ipykernel.kernelapp", _patch_kernel_app)


def _patch_kernel_app(module: ModuleType) -> None:
    """Wrap `IPKernelApp.init_shell` (ipykernel 4-7): the shell exists right after it."""
    hooks.run_after(module.IPKernelApp, "init_shell", _attach_cells)


def _attach_cells(app: object) -> None:
    shell = getattr(app, "shell", None)
    if shell is None:
        return
    try:
        from trainmedic.notebook import _cells as cells

        cells.attach(shell)
    except Exception as exc:  # the kernel runs on without cell events
        sys.stderr.write(f"trainmedic: notebook cells not recorded: {exc!r}\n")
