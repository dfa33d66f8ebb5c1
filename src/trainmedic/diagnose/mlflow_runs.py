"""`trainmedic diagnose mlflow://RUN_ID`: a run's metric histories from MLflow.

The tracking URI comes from `--tracking-uri`, else `MLFLOW_TRACKING_URI`, else MLflow's own
default where that store exists. Every metric becomes a step series (`tracker_series`), so
the rules judge it as they judge the same curve in TensorBoard. A run that names the epoch
(an `epoch` metric) maps its steps to epochs. An unknown run id, a store that does not exist
or a server that does not answer is one line, exit 2 (`mlflow_tracker.check_uri`). A run
that `trainmedic run` attached its diagnosis to shows those findings (`attached`).
"""

from __future__ import annotations

import os
from pathlib import Path

from trainmedic.diagnose import attached, tracker_series
from trainmedic.diagnose.source import LogRead
from trainmedic.errors import UsageError

SCHEME = "mlflow://"
#: The tag `trainmedic run` sets on every run it attaches its diagnosis to (`trackers.attach`).
ATTACHED_PREFIX = "trainmedic"
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
    from trainmedic.trackers import mlflow_tracker

    histories, tags = mlflow_tracker.histories(uri, run_id)
    read = LogRead(path=Path(run_id), format="mlflow", framework=_framework(tags), label=raw)
    tracker_series.fill(read, histories)
    if with_attached and ATTACHED_TAG in tags:
        _attached(read, raw, uri, run_id, tags)
    if not histories and not read.events:
        read.notes.append(f"{raw}: the run logged no metrics")
    return read


def _attached(read: LogRead, raw: str, uri: str, run_id: str, tags: dict[str, str]) -> None:
    from trainmedic.trackers import mlflow_tracker

    document, why = mlflow_tracker.attached_findings(uri, run_id)
    found = attached.events(document) if document is not None else []
    where = f"artifact {mlflow_tracker.ARTIFACT_DIR}/{attached.FILE}"
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
