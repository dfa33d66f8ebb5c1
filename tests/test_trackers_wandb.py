"""Into W&B offline, no code change: a script that logs with `wandb.init(mode="offline")` runs
under `trainmedic run`, and its run gets the diagnosis the way the SDK supports offline: the same
run id resumed in the same `wandb/` folder (what `wandb sync` uploads into that run).

Every check reads the folders back with the SDK's own reader (`wandb leet inspect --json`);
no network: WANDB_MODE=offline, WANDB_DIR in tmp, WANDB_SILENT=true.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import trainmedic_cmd

pytest.importorskip("wandb")
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "trackers" / "diverge_wandb.py"


def offline_env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        "WANDB_DIR": str(tmp_path),
        "WANDB_CONFIG_DIR": str(tmp_path / "config"),
        "WANDB_CACHE_DIR": str(tmp_path / "cache"),
        "NO_COLOR": "1",
    }


def trainmedic_run(
    tmp_path: Path, *args: str, script_args: tuple[str, ...] = ()
) -> tuple[subprocess.CompletedProcess[str], str]:
    command = [
        *trainmedic_cmd(),
        "run",
        "--out",
        str(tmp_path / "run"),
        *args,
        "--",
        sys.executable,
        str(EXAMPLE),
    ]
    result = subprocess.run(
        [*command, *script_args],
        capture_output=True, text=True, env=offline_env(tmp_path), cwd=tmp_path, timeout=600, check=False,
    )  # fmt: skip
    run_ids = [line.split()[-1] for line in result.stdout.splitlines() if line.startswith("wandb run ")]
    assert run_ids, result.stdout + result.stderr
    return result, run_ids[0]


def folders(tmp_path: Path, run_id: str) -> list[Path]:
    """The offline folders of one run, oldest first (W&B names them by start time)."""
    return sorted((tmp_path / "wandb").glob(f"offline-run-*-{run_id}"))


def sdk_records(folder: Path) -> list[dict[str, Any]]:
    """The run's records as the W&B SDK's reader prints them."""
    done = subprocess.run(
        [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(folder)],
        capture_output=True, text=True, env=offline_env(folder.parent.parent), timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def of(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r[kind] for r in records if r["type"] == kind]


def exit_codes(records: list[dict[str, Any]]) -> list[int]:
    """The exit records' codes; W&B adds the run time in whole seconds once it reaches 1."""
    return [exit_record["exit_code"] for exit_record in of(records, "exit")]


def summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for update in of(records, "summary"):
        merged.update(update.get("update", {}))
    return merged


def test_a_diverging_offline_run_carries_its_finding_and_report(tmp_path: Path) -> None:
    result, run_id = trainmedic_run(tmp_path)
    assert result.returncode == 0, result.stderr
    original, attached = folders(tmp_path, run_id)
    assert f"diagnosis attached to wandb run {run_id} ({attached})" in result.stderr
    assert "TRN002" in result.stderr  # the run's own diagnosis judged the curve logged only to W&B
    records = sdk_records(attached)
    [run] = of(records, "run")
    assert run["run_id"] == run_id
    assert run["resume"] is True
    assert run["project"] == "trackers-example"
    keys = summary(records)
    assert keys["trainmedic.status"] == "error"
    assert keys["trainmedic.findings"] == "TRN002"
    assert keys["trainmedic.errors"] == 1
    assert keys["trainmedic.warnings"] == 0
    assert keys["trainmedic.TRN002.step"] > 0
    saved = {f["path"] for update in of(records, "files") for f in update["files"]}
    assert {"findings.json", "report.html"} <= saved
    assert json.loads((attached / "files" / "findings.json").read_text())["findings"][0]["code"] == "TRN002"
    [alert] = of(records, "alert")
    assert alert["title"] == "TRN002 loss-divergence"
    assert f"(step {keys['trainmedic.TRN002.step']})" in alert["text"]
    assert exit_codes(records) == [0]
    # the script's own folder is left as it wrote it: its history, its exit
    first = sdk_records(original)
    assert len(of(first, "history")) == 60
    assert "trainmedic.status" not in summary(first)


def diagnose(tmp_path: Path, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*trainmedic_cmd(), "diagnose", "--format", "json", str(path)],
        capture_output=True, text=True, env=offline_env(tmp_path), cwd=tmp_path, timeout=300, check=False,
    )  # fmt: skip


def test_diagnose_shows_what_was_attached_from_any_folder_of_the_run(tmp_path: Path) -> None:
    """The script's folder, the resumed one, `latest-run` and `wandb/` are the same run; RUN004
    (an exit after fewer epochs than `--expect-epochs`) is in no curve: only the attachment has it."""
    result, run_id = trainmedic_run(tmp_path, "--expect-epochs", "5")
    assert result.returncode == 0, result.stderr
    attached = [f["code"] for f in json.loads((tmp_path / "run" / "findings.json").read_text())["findings"]]
    assert attached == ["RUN004", "TRN002"]
    original, resumed = folders(tmp_path, run_id)
    wandb_dir = tmp_path / "wandb"
    for path in (original, resumed, wandb_dir / "latest-run", wandb_dir):
        diagnosed = diagnose(tmp_path, path)
        assert diagnosed.returncode == 1, (path, diagnosed.stderr)
        document = json.loads(diagnosed.stdout)
        assert [f["code"] for f in document["findings"]] == attached, path
        [source] = document["sources"]
        assert source["points"] == 60  # the script's history, whichever folder was named
        said = "trainmedic run attached 2 findings (RUN004, TRN002) to this run"
        assert f"{said} ({resumed.name}/files/findings.json)" in diagnosed.stderr


@pytest.mark.cgroup
def test_an_oom_killed_offline_run_ends_failed(tmp_path: Path) -> None:
    result, run_id = trainmedic_run(
        tmp_path, "--memory-limit", "600M", script_args=("--grow-memory", "--steps", "400", "--lr", "0.01")
    )
    if result.returncode == 2 and "memory cgroup" in result.stderr:
        pytest.skip(result.stderr.strip())
    assert result.returncode == 137, result.stderr
    original, attached = folders(tmp_path, run_id)
    assert of(sdk_records(original), "exit") == []  # killed: the SDK never wrote how it ended
    records = sdk_records(attached)
    assert exit_codes(records) == [137]  # `wandb sync` marks the run failed
    keys = summary(records)
    assert "RUN001" in keys["trainmedic.findings"].split(",")
    assert keys["trainmedic.exit_status"] == 137


def test_tracker_option_sends_nothing_elsewhere(tmp_path: Path) -> None:
    result, run_id = trainmedic_run(tmp_path, "--tracker", "mlflow")
    assert result.returncode == 0, result.stderr
    assert len(folders(tmp_path, run_id)) == 1  # the script logged to W&B only: MLflow gets nothing
    assert "diagnosis attached" not in result.stderr
    assert not (tmp_path / "mlruns").exists()
    assert not (tmp_path / "mlflow.db").exists()
