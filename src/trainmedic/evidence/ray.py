"""Which processes of a run belong to a local Ray cluster, by their command lines.

Apart from `rules/_helpers/workers.py` (the launchers' reports of a dead worker, read only when a run
failed): the supervisor classifies every process tree with this, on every run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# Ray's own processes, started by `ray.init()` in the driver: the GCS, raylet, dashboard,
# log monitor and the worker processes that run tasks and actors (their title becomes
# `ray::ClassName` once they run one). They work for the driver, which is the trainer.
_RAY_PROCESS = re.compile(r"[/\\]ray[/\\](?:_private|dashboard|autoscaler|core)[/\\]")


def is_ray_process(cmdline: Sequence[str]) -> bool:
    """A process of a local Ray cluster (daemon or task/actor worker), by its command line."""
    if cmdline and cmdline[0].startswith("ray::"):
        return True
    return any(_RAY_PROCESS.search(arg) for arg in cmdline[:3])
