"""Inside the trainer: learn the tracker runs the script opens, at the moment it opens them.

Armed by the boot hooks when the script imports `mlflow` or `wandb` (never before):
one wrapper each around the calls that open a run (`MlflowClient.create_run`, which
`mlflow.start_run`, autolog and Lightning's MLFlowLogger all go through, `mlflow.start_run`
for a resumed run, and `wandb.init`, which Lightning's and HF's W&B callbacks call). The
wrapper records the run in the run folder (`learned.record`) and returns the framework's
own result untouched. Nothing else is wrapped: logging a metric costs what it costs bare.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from trainmedic.trackers import learned

_MARK = "_trainmedic_tracker"


def _wrap(owner: Any, name: str, seen: Callable[[Any, tuple[Any, ...], dict[str, Any]], None]) -> None:
    """Make `owner.name` call `seen(result, args, kwargs)` after the original; once per owner."""
    original = getattr(owner, name, None)
    if original is None or getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        try:
            seen(result, args, kwargs)
        except Exception as exc:  # learning the run must never break the script's own call
            sys.stderr.write(f"trainmedic: tracker run not recorded: {exc!r}\n")
        return result

    setattr(wrapper, _MARK, True)
    setattr(owner, name, wrapper)


def install_mlflow(module: ModuleType) -> None:
    from mlflow.tracking import fluent
    from mlflow.tracking.client import MlflowClient

    def created(run: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        client = args[0]
        _record_mlflow(run.info.run_id, str(client.tracking_uri))

    def started(active: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        _record_mlflow(active.info.run_id, str(module.get_tracking_uri()))

    _wrap(MlflowClient, "create_run", created)
    _wrap(fluent, "start_run", started)
    _wrap(module, "start_run", started)  # `mlflow.start_run`, bound at import to the original


def _record_mlflow(run_id: str, uri: str) -> None:
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        uri = "sqlite:///" + str(Path(uri[len("sqlite:///") :]).absolute())  # relative to the script's cwd
    elif "://" not in uri:
        uri = str(Path(uri).absolute())  # a plain ./mlruns folder
    learned.record(learned.TrackerRun(tracker=learned.MLFLOW, run_id=run_id, location=uri, pid=os.getpid()))


def install_wandb(module: ModuleType) -> None:
    def initialised(run: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        settings = run.settings
        mode = str(getattr(settings, "mode", "") or "")
        if mode == "disabled" or getattr(settings, "_noop", False):
            return
        learned.record(
            learned.TrackerRun(
                tracker=learned.WANDB,
                run_id=str(run.id),
                location=str(settings.sync_dir),
                path=str(run.path),
                mode=mode,
                root=str(settings.root_dir),
                pid=os.getpid(),
            )
        )

    _wrap(module, "init", initialised)
