"""Into MLflow, no code change: a script that logs to MLflow runs under `trainmedic run`, and its
own MLflow run, on a real tracking server, carries the diagnosis afterwards.

The server is `mlflow server` on a SQLite backend with a local artifact store, started once for
the module on a free 127.0.0.1 port and killed after. Everything is checked through
`MlflowClient` against that server.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import trainmedic_cmd

pytest.importorskip("mlflow")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.heavy,
    pytest.mark.timeout(900),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),  # inside mlflow's own imports
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "trackers" / "diverge_mlflow.py"
SERVER_START_S = 240.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real `mlflow server` (SQLite backend, local artifact root); its URI."""
    root = tmp_path_factory.mktemp("mlflow-server")
    port = _free_port()
    uri = f"http://127.0.0.1:{port}"
    command = [
        sys.executable, "-m", "mlflow", "server",
        "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
        "--artifacts-destination", str(root / "artifacts"),
        "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
    ]  # fmt: skip
    log = (root / "server.log").open("wb")
    # the server's job runner (a huey consumer per job kind, each importing mlflow) is for
    # GenAI evaluation jobs these tests never submit: off, it costs no CPU beside the suite
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    try:
        deadline = time.monotonic() + SERVER_START_S
        while not _healthy(uri):
            assert proc.poll() is None, (root / "server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "mlflow server did not start"
            time.sleep(0.5)
        yield uri
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
        log.close()


def _healthy(uri: str) -> bool:
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def trainmedic_run(
    server: str, tmp_path: Path, *args: str, script_args: tuple[str, ...] = (), script: Path = EXAMPLE
) -> tuple[subprocess.CompletedProcess[str], Path, str]:
    """`trainmedic run [args] -- python diverge_mlflow.py`; (result, run folder, MLflow run id)."""
    run_dir = tmp_path / "run"
    env = {**os.environ, "MLFLOW_TRACKING_URI": server, "NO_COLOR": "1"}
    command = [*trainmedic_cmd(), "run", "--out", str(run_dir), *args, "--", sys.executable, str(script)]
    result = subprocess.run(
        [*command, *script_args],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600, check=False,
    )  # fmt: skip
    run_ids = [line.split()[-1] for line in result.stdout.splitlines() if line.startswith("mlflow run ")]
    assert run_ids, result.stdout + result.stderr
    return result, run_dir, run_ids[0]


def client(server: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(server)


def test_a_diverging_run_carries_its_finding_and_report(server: str, tmp_path: Path) -> None:
    result, run_dir, run_id = trainmedic_run(server, tmp_path)
    assert result.returncode == 0, result.stderr
    mlflow = client(server)
    run = mlflow.get_run(run_id)
    tags = run.data.tags
    assert tags["trainmedic.status"] == "error"
    assert tags["trainmedic.errors"] == "1"
    assert tags["trainmedic.findings"] == "TRN002"
    assert "diverged" in tags["trainmedic.TRN002"]
    assert int(tags["trainmedic.TRN002.step"]) > 0
    assert run.info.status == "FINISHED"  # the script ended its run itself
    artifacts = {a.path for a in mlflow.list_artifacts(run_id, "trainmedic")}
    assert artifacts == {"trainmedic/findings.json", "trainmedic/report.html"}
    findings = json.loads(
        Path(mlflow.download_artifacts(run_id, "trainmedic/findings.json", str(tmp_path))).read_text()
    )
    assert [f["code"] for f in findings["findings"]] == ["TRN002"]
    assert f"diagnosis attached to mlflow run {run_id}" in result.stderr
    assert "TRN002" in result.stderr  # the run's own diagnosis judged the curve it logged only to MLflow
    [learned] = {
        json.dumps(json.loads(line), sort_keys=True)
        for line in (run_dir / "trackers.jsonl").read_text().splitlines()
    }
    assert json.loads(learned)["location"] == server


def test_diagnose_reads_the_run_from_the_server(server: str, tmp_path: Path) -> None:
    result, _, run_id = trainmedic_run(server, tmp_path, "--tracker", "none")
    assert result.returncode == 0, result.stderr
    assert "trainmedic.status" not in client(server).get_run(run_id).data.tags  # --tracker none: nothing sent
    diagnosed = subprocess.run(
        [*trainmedic_cmd(), "diagnose", "--format", "json", "--tracking-uri", server, f"mlflow://{run_id}"],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert diagnosed.returncode == 1, diagnosed.stderr
    assert [f["code"] for f in json.loads(diagnosed.stdout)["findings"]] == ["TRN002"]


@pytest.mark.cgroup
def test_an_oom_killed_run_is_marked_failed(server: str, tmp_path: Path) -> None:
    result, _, run_id = trainmedic_run(
        server,
        tmp_path,
        "--memory-limit",
        "700M",
        script_args=("--grow-memory", "--steps", "400", "--lr", "0.01"),
    )
    if result.returncode == 2 and "memory cgroup" in result.stderr:
        pytest.skip(result.stderr.strip())  # not root / no delegated cgroup on this machine
    assert result.returncode == 137, result.stderr
    run = client(server).get_run(run_id)
    assert run.info.status == "FAILED"
    assert "RUN001" in run.data.tags["trainmedic.findings"].split(",")
    assert run.data.tags["trainmedic.exit_status"] == "137"


# As Lightning's MLFlowLogger logs: through `MlflowClient`, no fluent run; here it crashes after
# its loss went NaN and never ends its run.
CLIENT_API_SCRIPT = """
import os
from mlflow.tracking import MlflowClient
client = MlflowClient()
run = client.create_run(client.create_experiment(f"client-api-{os.getpid()}"))
print("mlflow run", run.info.run_id, flush=True)
for step in range(40):
    loss = float("nan") if step >= 30 else 1 / (step + 1)
    client.log_metric(run.info.run_id, "train_loss", loss, step=step)
raise RuntimeError("loss is nan")
"""


def test_a_run_opened_through_the_client_api_that_crashes(server: str, tmp_path: Path) -> None:
    script = tmp_path / "client_api.py"
    script.write_text(CLIENT_API_SCRIPT)
    result, _, run_id = trainmedic_run(server, tmp_path, script=script)
    assert result.returncode == 1, result.stderr
    run = client(server).get_run(run_id)
    assert run.info.status == "FAILED"  # left RUNNING by the script: ended by trainmedic
    codes = run.data.tags["trainmedic.findings"].split(",")
    assert "TRN001" in codes
    assert run.data.tags["trainmedic.TRN001.step"] == "30"
    # diagnosing the run shows what was attached to it: the crash is in no logged curve
    diagnosed = subprocess.run(
        [*trainmedic_cmd(), "diagnose", "--format", "json", "--tracking-uri", server, f"mlflow://{run_id}"],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert diagnosed.returncode == 1, diagnosed.stderr
    assert [f["code"] for f in json.loads(diagnosed.stdout)["findings"]] == codes
    assert f"mlflow://{run_id}: trainmedic run attached" in diagnosed.stderr
