"""`trainmedic diagnose` from the trackers: an MLflow run (SQLite store) and a W&B offline run
folder are judged as the same curves written to TensorBoard, and bad input is one line, exit 2.

The curves are written by the real libraries in subprocesses (MLflow's client on SQLite, the
W&B SDK offline, TensorBoard's own event writer) and diagnosed by the real CLI.
"""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.diagnose.write_tb import curves

pytest.importorskip("mlflow")
pytest.importorskip("wandb")
pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(600)]

SCENARIOS = ("healthy", "nan", "overfit", "diverge")


def rows(scenario: str) -> list[tuple[int, float, float]]:
    """(step, train_loss, val_loss): the TensorBoard writers' formulas, plus a divergence."""
    if scenario != "diverge":
        return curves(scenario)
    return [(s, 1.0 / (1.0 + 0.1 * s) if s < 50 else 0.2 * 1.3 ** (s - 50), 0.6) for s in range(100)]


WRITE_MLFLOW = """
import json, sys
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient
client = MlflowClient(sys.argv[1])
ids = {}
for scenario, rows in json.loads(sys.argv[2]).items():
    run = client.create_run(client.create_experiment(scenario))
    metrics = [Metric(name, float(value), 1_700_000_000_000 + step * 1000, step)
               for step, train, val in rows for name, value in (("train_loss", train), ("val_loss", val))]
    for i in range(0, len(metrics), 900):
        client.log_batch(run.info.run_id, metrics=metrics[i:i + 900])
    client.set_terminated(run.info.run_id)
    ids[scenario] = run.info.run_id
print(json.dumps(ids))
"""

WRITE_WANDB = """
import json, sys, wandb
folders = {}
for scenario, rows in json.loads(sys.argv[1]).items():
    run = wandb.init(project="diagnose", dir=sys.argv[2] + "/" + scenario, mode="offline")
    for step, train, val in rows:
        run.log({"train_loss": train, "val_loss": val}, step=step)
    folders[scenario] = str(run.settings.sync_dir)
    run.finish()
print(json.dumps(folders))
"""

# TensorBoard's own writer (the one torch's SummaryWriter uses), with TensorFlow kept out: fast.
WRITE_TENSORBOARD = """
import json, sys
sys.modules["tensorflow"] = None
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter
for scenario, rows in json.loads(sys.argv[1]).items():
    writer = EventFileWriter(sys.argv[2] + "/" + scenario)
    for step, train, val in rows:
        values = [summary_pb2.Summary.Value(tag=tag, simple_value=value)
                  for tag, value in (("train_loss", train), ("val_loss", val))]
        summary = summary_pb2.Summary(value=values)
        writer.add_event(event_pb2.Event(wall_time=1.7e9 + step, step=step, summary=summary))
    writer.close()
"""


def _python(code: str, *args: str, cwd: Path) -> str:
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DIR": str(cwd)}
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Every scenario written once to each of MLflow (SQLite), W&B (offline) and TensorBoard."""
    root = tmp_path_factory.mktemp("trackers")
    data = json.dumps({s: [[a, b, c] for a, b, c in rows(s)] for s in SCENARIOS}, allow_nan=True)
    uri = f"sqlite:///{root / 'mlflow.db'}"
    ids = json.loads(_python(WRITE_MLFLOW, uri, data, cwd=root))
    folders = json.loads(_python(WRITE_WANDB, data, str(root / "wandb"), cwd=root))
    _python(WRITE_TENSORBOARD, data, str(root / "tb"), cwd=root)
    return {"uri": uri, "ids": ids, "wandb": folders, "tb": root / "tb", "root": root}


def diagnose(*args: str) -> tuple[list[tuple[str, int | None]], dict[str, object]]:
    result = run_cli("diagnose", "--format", "json", *args, timeout=180)
    assert result.returncode in (0, 1), result.stderr
    doc = json.loads(result.stdout)
    found = sorted((f["code"], f["step"]) for f in doc["findings"])
    return found, doc


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_mlflow_and_wandb_runs_find_what_tensorboard_finds(stores: dict[str, object], scenario: str) -> None:
    ids, folders = stores["ids"], stores["wandb"]
    assert isinstance(ids, dict)
    assert isinstance(folders, dict)
    tb, _ = diagnose(str(Path(str(stores["tb"])) / scenario))
    from_mlflow, doc = diagnose("--tracking-uri", str(stores["uri"]), f"mlflow://{ids[scenario]}")
    from_wandb, _ = diagnose(folders[scenario])
    assert from_mlflow == tb
    assert from_wandb == tb
    expected = {"healthy": set(), "nan": {"TRN001"}, "overfit": {"TRN004"}, "diverge": {"TRN002"}}
    assert expected[scenario] <= {code for code, _ in tb}
    if scenario == "healthy":
        assert tb == []
    [source] = doc["sources"]  # type: ignore[index]
    assert source["path"] == f"mlflow://{ids[scenario]}"
    assert source["points"] == 200


def test_text_output_names_the_metric_read_as_the_loss(stores: dict[str, object]) -> None:
    folders = stores["wandb"]
    assert isinstance(folders, dict)
    result = run_cli("diagnose", folders["diverge"])
    assert result.returncode == 1, result.stderr
    assert "loss: train_loss (100 points, per step)" in result.stdout
    assert "(wandb): 200 values" in result.stdout


def test_mlflow_tracking_uri_from_the_environment(stores: dict[str, object]) -> None:
    ids = stores["ids"]
    assert isinstance(ids, dict)
    env = {**os.environ, "MLFLOW_TRACKING_URI": str(stores["uri"])}
    result = subprocess.run(
        [sys.executable, "-m", "trainmedic", "diagnose", f"mlflow://{ids['nan']}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert "TRN001" in result.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _one_line_exit_2(*args: str, within: float = 30.0, env: dict[str, str] | None = None) -> str:
    t0 = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "trainmedic", "diagnose", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )
    took = time.monotonic() - t0
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("trainmedic: error: ")
    assert took < within, f"{took:.1f} s"
    return line


def test_unknown_mlflow_run_id(stores: dict[str, object]) -> None:
    line = _one_line_exit_2("--tracking-uri", str(stores["uri"]), "mlflow://0123456789abcdef0123456789abcdef")
    assert "mlflow://0123456789abcdef0123456789abcdef: no such run at sqlite:///" in line


def test_unreachable_tracking_server() -> None:
    uri = f"http://127.0.0.1:{_free_port()}"
    line = _one_line_exit_2("--tracking-uri", uri, "mlflow://0123456789abcdef0123456789abcdef", within=15)
    assert f"tracking URI {uri}: the tracking server does not answer" in line


def test_missing_sqlite_file_is_not_created(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'typo.db'}"
    line = _one_line_exit_2("--tracking-uri", uri, "mlflow://abc")
    assert "no such SQLite file" in line
    assert not (tmp_path / "typo.db").exists()


def test_legacy_mlruns_folder_needs_mlflow_allow_file_store(tmp_path: Path) -> None:
    (tmp_path / "mlruns").mkdir()
    env = {"MLFLOW_ALLOW_FILE_STORE": ""}
    line = _one_line_exit_2("--tracking-uri", str(tmp_path / "mlruns"), "mlflow://abc", env=env)
    assert "MLFLOW_ALLOW_FILE_STORE=true" in line


def test_no_store_named(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    result = subprocess.run(
        [sys.executable, "-m", "trainmedic", "diagnose", "mlflow://abc"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "Give --tracking-uri or set MLFLOW_TRACKING_URI" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_folder_named_as_a_wandb_run_without_its_log(tmp_path: Path) -> None:
    folder = tmp_path / "offline-run-20261205_110404-abc123"
    (folder / "files").mkdir(parents=True)
    (folder / "files" / "wandb-metadata.json").write_text("{}")
    line = _one_line_exit_2(str(folder))
    assert f"{folder}: not a W&B run (expected one run-ID.wandb log in the folder)" in line


def test_a_corrupt_wandb_log(tmp_path: Path) -> None:
    folder = tmp_path / "offline-run-20261205_110404-abc123"
    folder.mkdir()
    (folder / "run-abc123.wandb").write_bytes(b"\x00garbage" * 100)
    line = _one_line_exit_2(str(folder))
    assert "run-abc123.wandb" in line


def test_nan_is_read_as_nan_from_wandb(stores: dict[str, object]) -> None:
    folders = stores["wandb"]
    assert isinstance(folders, dict)
    _, doc = diagnose(folders["nan"])
    [finding] = [f for f in doc["findings"] if f["code"] == "TRN001"]  # type: ignore[union-attr]
    assert finding["step"] == 60
    assert not math.isfinite(float(rows("nan")[60][1]))


def test_a_wandb_folder_reads_its_one_run_and_names_several(
    stores: dict[str, object], tmp_path: Path
) -> None:
    import shutil

    folders = stores["wandb"]
    assert isinstance(folders, dict)
    one = Path(folders["diverge"]).parent  # the `wandb/` folder the SDK made for that run alone
    found, _ = diagnose(str(one))
    assert [code for code, _ in found] == ["TRN002"]
    several = tmp_path / "wandb"
    for scenario in ("healthy", "nan"):
        shutil.copytree(folders[scenario], several / Path(folders[scenario]).name)
    line = _one_line_exit_2(str(several))
    assert f"{several}: holds 2 W&B runs; give one run folder" in line


def test_the_trainer_finds_its_run_folder_where_the_supervisor_names_it() -> None:
    from trainmedic import runfolder
    from trainmedic.trackers import learned

    assert learned.RUN_DIR_ENV == runfolder.RUN_DIR_ENV  # the hooks stay stdlib-only: no import of it
