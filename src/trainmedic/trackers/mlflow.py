"""MLflow, both ways: a run's metric histories read back, and the diagnosis put on a run after it ended.

Reading (`trainmedic diagnose mlflow://RUN_ID`): the tracking URI comes from `--tracking-uri`,
else `MLFLOW_TRACKING_URI`, else MLflow's own default where that store exists. Every metric
becomes a step series (`tracker_series`), so the rules judge it as they judge the same curve
in TensorBoard. A run that names the epoch (an `epoch` metric) maps its steps to epochs. An
unknown run id, a store that does not exist or a server that does not answer is one line,
exit 2 (`check_uri`). A run that `trainmedic run` attached its diagnosis to shows those
findings (`attached`).

Attaching (`trackers.attach`, after a supervised run): tags, artifacts, and `FAILED` for a run
left `RUNNING`.

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
from typing import Any
from urllib.parse import urlparse

from trainmedic.diagnose import attached, tracker_series
from trainmedic.diagnose.source import LogRead
from trainmedic.diagnose.tracker_series import History
from trainmedic.errors import UsageError, install_hint
from trainmedic.trackers.learned import TrackerRun
from trainmedic.trackers.payload import PREFIX, Attachment

INSTALL = f"reading MLflow runs needs the mlflow package: {install_hint('mlflow', 'mlflow')}"
CONNECT_TIMEOUT_S = 5.0
#: A server that does not answer fails in seconds, not after MLflow's default retries (minutes).
_FAST_FAIL = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}
ARTIFACT_DIR = "trainmedic"

SCHEME = "mlflow://"
#: The tag `trainmedic run` sets on every run it attaches its diagnosis to (`trackers.attach`).
ATTACHED_PREFIX = PREFIX
ATTACHED_TAG = f"{ATTACHED_PREFIX}.status"
#: MLflow's run ids: 32 hex digits (older stores and other servers may use other ids).
_MAX_ID = 256


def is_mlflow_source(raw: str) -> bool:
    return raw.startswith(SCHEME)


def read_mlflow_run(raw: str, tracking_uri: str | None, *, with_attached: bool = True) -> LogRead:
    """The run's metric histories; with `with_attached`, the findings `trainmedic run` attached
    to it (its `trainmedic/findings.json` artifact, where its tags say one was attached)."""
    run_id = raw[len(SCHEME) :].strip("/")
    if not run_id or len(run_id) > _MAX_ID or "/" in run_id:
        raise UsageError(f"{raw}: expected mlflow://RUN_ID (the run's id, as the MLflow UI shows it)")
    uri = _tracking_uri(tracking_uri, raw)
    metrics, tags = histories(uri, run_id)
    read = LogRead(path=Path(run_id), format="mlflow", framework=_framework(tags), label=raw)
    tracker_series.fill(read, metrics)
    if with_attached and ATTACHED_TAG in tags:
        _attached(read, raw, uri, run_id, tags)
    if not metrics and not read.events:
        read.notes.append(f"{raw}: the run logged no metrics")
    return read


def _attached(read: LogRead, raw: str, uri: str, run_id: str, tags: dict[str, str]) -> None:
    document, why = attached_findings(uri, run_id)
    found = attached.events(document) if document is not None else []
    where = f"artifact {ARTIFACT_DIR}/{attached.FILE}"
    if document is not None:
        read.events.extend(found)
        read.notes.append(attached.note(raw, found, where))
    else:
        codes = tags.get(f"{ATTACHED_PREFIX}.findings") or "none"
        read.notes.append(
            f"{raw}: trainmedic run attached {codes} to this run; its {where} is unreadable ({why})"
        )


def _tracking_uri(given: str | None, raw: str) -> str:
    uri = given or os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        return uri
    for default in ("sqlite:///mlflow.db", "mlruns"):
        if Path(default.removeprefix("sqlite:///")).exists():
            return default
    raise UsageError(f"{raw}: which MLflow store? Give --tracking-uri or set MLFLOW_TRACKING_URI")


def _framework(tags: dict[str, str]) -> str:
    """The framework autolog names (`mlflow.autologging`), else MLflow itself."""
    return tags.get("mlflow.autologging") or "mlflow"


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
