"""`trainmedic diagnose mlflow://RUN_ID`: a run's metric histories from MLflow.

The tracking URI comes from `--tracking-uri`, else `MLFLOW_TRACKING_URI`, else MLflow's own
default where that store exists. Every metric becomes a step series (`tracker_series`), so
the rules judge it as they judge the same curve in TensorBoard. A run that names the epoch
(an `epoch` metric) maps its steps to epochs. An unknown run id, a store that does not exist
or a server that does not answer is one line, exit 2 (`mlflow_tracker.check_uri`).
"""

from __future__ import annotations

import os
from pathlib import Path

from trainmedic.diagnose import tracker_series
from trainmedic.diagnose.source import LogRead
from trainmedic.errors import UsageError

SCHEME = "mlflow://"
#: MLflow's run ids: 32 hex digits (older stores and other servers may use other ids).
_MAX_ID = 256


def is_mlflow_source(raw: str) -> bool:
    return raw.startswith(SCHEME)


def read_mlflow_run(raw: str, tracking_uri: str | None) -> LogRead:
    run_id = raw[len(SCHEME) :].strip("/")
    if not run_id or len(run_id) > _MAX_ID or "/" in run_id:
        raise UsageError(f"{raw}: expected mlflow://RUN_ID (the run's id, as the MLflow UI shows it)")
    uri = _tracking_uri(tracking_uri, raw)
    from trainmedic.trackers import mlflow_tracker

    histories, tags = mlflow_tracker.histories(uri, run_id)
    read = LogRead(path=Path(run_id), format="mlflow", framework=_framework(tags), label=raw)
    tracker_series.fill(read, histories)
    if not histories:
        read.notes.append(f"{raw}: the run logged no metrics")
    return read


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
