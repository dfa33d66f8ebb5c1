"""The environment that turns instrumentation on in a child process tree.

`trainmedic run` (and tests, and `verify-resume`) start children with this
environment: the boot directory first on PYTHONPATH (so its `sitecustomize`
runs in every Python process of the tree, launchers' children included), the
events file to append to, and where trainmedic itself lives for interpreters
of other virtual environments.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from trainmedic.instrument.channel import EVENTS_ENV, INSTRUMENT_ENV

BOOT_DIR = Path(__file__).resolve().parent / "boot"
PACKAGE_PARENT = Path(__file__).resolve().parents[2]  # the folder holding `trainmedic/`


def child_env(
    events_path: str | os.PathLike[str],
    base: Mapping[str, str] | None = None,
    *,
    instrument: bool = True,
) -> dict[str, str]:
    """A copy of `base` (default: os.environ) that instruments Python children.

    With `instrument=False` only TRAINMEDIC_INSTRUMENT=0 is added: children run
    exactly as they would bare.
    """
    env = dict(os.environ if base is None else base)
    if not instrument:
        env[INSTRUMENT_ENV] = "0"
        return env
    parts = [str(BOOT_DIR), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    env[EVENTS_ENV] = str(Path(events_path).resolve())
    env["TRAINMEDIC_PKG_DIR"] = str(PACKAGE_PARENT)
    env.pop(INSTRUMENT_ENV, None)
    return env
