"""The run's environment manifest, captured beside the run instead of before it.

`capture_manifest` lists every installed distribution and asks git about the worktree:
about half a second. Done in a thread that starts with the run, it never delays the
trainer's start; the supervisor joins it when the run is over, writes it into
manifest.json and adds it to the events so the ENV rules (ENV002 dirty-worktree) read it
like any other fact.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainmedic.envinfo._manifest import capture_manifest, manifest_event
from trainmedic.events import Event

# configcheck._CONFIG_SUFFIXES: the files configs_in_command reads (a test keeps them equal)
CONFIG_SUFFIXES = (".json", ".yaml", ".yml")


def names_a_config_file(argv: Sequence[str]) -> bool:
    """Whether the command names a file configcheck could read: only then is it imported
    (with the CFG rules and the YAML reader), which most commands do not need."""
    return any(arg.rpartition("=")[2].lower().endswith(CONFIG_SUFFIXES) for arg in argv)


class EnvironmentCapture:
    """Captures the manifest and the configuration files the command names, off the main thread.

    `query_gpus`: whether a GPU driver may be there to ask (`supervise.gpu.driver_may_exist`).
    """

    def __init__(self, command: Sequence[str], cwd: Path, *, query_gpus: bool) -> None:
        self._command = list(command)
        self._cwd = cwd
        self._query_gpus = query_gpus
        self._manifest: dict[str, Any] | None = None
        self._observations: list[Event] = []
        self._thread = threading.Thread(target=self._capture, name="trainmedic-env", daemon=True)
        self._thread.start()

    def _capture(self) -> None:
        try:
            self._manifest = capture_manifest(
                command=self._command, cwd=self._cwd, query_gpus=self._query_gpus
            )
        except Exception as exc:  # the run's diagnosis must never depend on this
            sys.stderr.write(f"trainmedic: environment capture failed: {exc!r}\n")
        if not names_a_config_file(self._command):
            return
        try:
            from trainmedic.configcheck import configs_in_command

            self._observations = list(configs_in_command(self._command, self._cwd))
        except Exception as exc:
            sys.stderr.write(f"trainmedic: configuration check of the command failed: {exc!r}\n")

    def wait(self, timeout: float = 30.0) -> None:
        """Until the capture is over, and with it the `git` it runs: the supervisor waits for it
        before it ends the tree's leftovers, which would otherwise count that `git` among them."""
        self._thread.join(timeout)

    def result(self, timeout: float = 30.0) -> tuple[dict[str, Any] | None, list[Event]]:
        """The manifest (None if it failed) and the events to add to the run."""
        self.wait(timeout)
        events: list[Event] = list(self._observations)
        if self._manifest is not None:
            events.append(manifest_event(self._manifest))
        return self._manifest, events
