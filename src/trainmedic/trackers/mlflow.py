"""MLflow: open a client that fails fast on bad input, read a run's metric histories, and put
the diagnosis on a run after it ended (tags, artifacts, and `FAILED` for a run left `RUNNING`).

The tracking URI is what the script used (`learned`) or what the user gives `diagnose`: a
SQLite file (`sqlite:///…`), a tracking server (`http(s)://…`), or a legacy `mlruns` folder,
which MLflow 3 opens only with `MLFLOW_ALLOW_FILE_STORE=true`. A URI MLflow would silently
create (a SQLite file or a folder that does not exist) is refused instead: a typo must not
start an empty store.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from trainmedic.diagnose.tracker_series import History
from trainmedic.errors import UsageError, install_hint
from trainmedic.trackers.learned import TrackerRun

if TYPE_CHECKING:
    from trainmedic.trackers.attach import Attachment

INSTALL = f"reading MLflow runs needs the mlflow package: {install_hint('mlflow', 'mlflow')}"
CONNECT_TIMEOUT_S = 5.0
#: A server that does not answer fails in seconds, not after MLflow's default retries (minutes).
_FAST_FAIL = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}
ARTIFACT_DIR = "trainmedic"


def check_uri(uri: str) -> None:
    """Refuse a store that does not exist or a server that does not answer, in one line."""
    parsed = urlparse(uri)
    if parsed.scheme == "sqlite":
        path = uri[len("sqlite:///") :] if uri.startswith("sqlite:///") else parsed.path
        if path and path != ":memory:" and not Path(path).is_file():
            raise UsageError(f"tracking URI {uri}: no such SQLite file ({path})")
    elif parsed.scheme in ("http", "https"):
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            socket.create_connection((parsed.hostname or "localhost", port), CONNECT_TIMEOUT_S).close()
        except OSError as exc:
            raise UsageError(f"tracking URI {uri}: the tracking server does not answer ({exc})") from exc
    elif parsed.scheme in ("", "file"):
        folder = Path(parsed.path if parsed.scheme == "file" else uri)
        if not folder.is_dir():
            raise UsageError(f"tracking URI {uri}: no such mlruns folder")
        if os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() not in ("true", "1"):
            raise UsageError(
                f"tracking URI {uri}: MLflow 3 opens a legacy mlruns folder only with "
                "MLFLOW_ALLOW_FILE_STORE=true (or migrate it: mlflow migrate-filestore)"
            )


@contextlib.contextmanager
def fast_fail() -> Iterator[None]:
    """MLflow's HTTP retries off for the calls inside (a user's own settings win)."""
    added = [k for k in _FAST_FAIL if k not in os.environ]
    os.environ.update({k: _FAST_FAIL[k] for k in added})
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


def client(uri: str) -> Any:
    """An `MlflowClient` for `uri`, checked first (`check_uri`)."""
    check_uri(uri)
    try:
        from mlflow.tracking import MlflowClient
    except ImportError as exc:
        raise UsageError(INSTALL) from exc
    return MlflowClient(tracking_uri=uri)


def histories(uri: str, run_id: str) -> tuple[dict[str, History], dict[str, str]]:
    """Every metric's history of run `run_id`, and the run's tags (names as MLflow shows them)."""
    from mlflow.exceptions import MlflowException

    with fast_fail():
        mlflow_client = client(uri)
        try:
            run = mlflow_client.get_run(run_id)
            found: dict[str, History] = {}
            for key in sorted(run.data.metrics):
                history = found.setdefault(key, History())
                for metric in mlflow_client.get_metric_history(run_id, key):
                    history.add(int(metric.step), float(metric.value), metric.timestamp / 1000.0)
        except MlflowException as exc:
            raise UsageError(f"mlflow://{run_id}: {_reason(exc, uri)}") from exc
    return found, dict(run.data.tags)


def attached_findings(uri: str, run_id: str) -> tuple[Any, str | None]:
    """The `findings.json` that `trainmedic run` attached to the run (`ARTIFACT_DIR`), parsed;
    (None, why) when it cannot be read."""
    import tempfile

    from mlflow.exceptions import MlflowException

    with fast_fail(), tempfile.TemporaryDirectory(prefix="trainmedic-mlflow-") as folder:
        try:
            local = client(uri).download_artifacts(run_id, f"{ARTIFACT_DIR}/findings.json", folder)
            return json.loads(Path(local).read_text(encoding="utf-8")), None
        except (MlflowException, OSError, ValueError) as exc:
            lines = str(exc).strip().splitlines()
            return None, (lines[0][:200] if lines else type(exc).__name__)


def _reason(exc: Exception, uri: str) -> str:
    code = getattr(exc, "error_code", "")
    if code == "RESOURCE_DOES_NOT_EXIST" or "not found" in str(exc).lower():
        return f"no such run at {uri}"
    lines = str(exc).strip().splitlines()
    return f"{uri}: {lines[0][:300] if lines else type(exc).__name__}"


def attach(run: TrackerRun, diagnosis: Attachment) -> str:
    """Tags and artifacts on `run`; a run its process left `RUNNING` is ended `FAILED` (or
    `KILLED` when trainmedic stopped it). Returns where it went (the run's artifact URI)."""
    with fast_fail():
        mlflow_client = client(run.location)
        for key, value in diagnosis.tags.items():
            mlflow_client.set_tag(run.run_id, key, str(value))
        for path in diagnosis.files:
            mlflow_client.log_artifact(run.run_id, str(path), ARTIFACT_DIR)
        info = mlflow_client.get_run(run.run_id).info
        if info.status == "RUNNING" and diagnosis.exit_status != 0:
            mlflow_client.set_terminated(run.run_id, "KILLED" if diagnosis.stopped else "FAILED")
        return str(info.artifact_uri)
