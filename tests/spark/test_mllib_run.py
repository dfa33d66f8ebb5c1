"""The three MLlib examples under a real `trainmedic run` with a real local Spark.

`python script.py` for the healthy pipeline and the one evaluated on its training rows, and
`spark-submit script.py` for the scaler fitted before the split (three JVMs on a 2-core
machine): the findings land in the run folder, the Python driver is the trainer, Spark's
JVM and daemon are neither trainers nor orphans. Skipped only where Java cannot run
(pyspark needs it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ..conftest import trainmedic_cmd

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "spark"
BIN = Path(sys.executable).parent
JOBS: dict[str, list[str]] = {
    "healthy": [sys.executable, "mllib_healthy.py"],
    "evaluated_on_train": [sys.executable, "mllib_evaluated_on_train.py"],
    "spark_submit": [str(BIN / "spark-submit"), "--master", "local[2]", "mllib_scaler_before_split.py"],
}


def _java_missing() -> str | None:
    try:
        subprocess.run(["java", "-version"], capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"pyspark needs Java 17+, and `java -version` failed: {exc}"
    return None


pytestmark = [
    pytest.mark.slow,
    pytest.mark.heavy,
    pytest.mark.timeout(900),  # the module's fixture runs three Spark jobs of up to 300 s each
    pytest.mark.skipif(_java_missing() is not None, reason=str(_java_missing())),
]

Run = tuple[subprocess.CompletedProcess[str], list[dict[str, Any]], list[dict[str, Any]]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    tmp = tmp_path_factory.mktemp("mllib-run")
    # spark-submit finds Spark and the driver's Python on PATH, as in an activated venv
    env = {**os.environ, "NO_COLOR": "1", "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}

    def one(name: str) -> Run:
        out = tmp / name
        shutil.rmtree(out, ignore_errors=True)
        result = subprocess.run(
            [*trainmedic_cmd(), "run", "--quiet", "--out", str(out), "--", *JOBS[name]],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            cwd=EXAMPLES,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        findings = (
            json.loads((out / "findings.json").read_text())["findings"]
            if (out / "findings.json").exists()
            else []
        )
        events = [
            json.loads(line) for line in (out / "events.jsonl").read_text().splitlines() if line.strip()
        ]
        log = (out / "output.log").read_text(errors="replace") if (out / "output.log").exists() else ""
        assert "not observed" not in log, log[-3000:]  # a guard that failed says so on stderr
        return result, findings, events

    with ThreadPoolExecutor(max_workers=len(JOBS)) as pool:
        return dict(zip(JOBS, pool.map(one, JOBS), strict=True))


def serious(findings: list[dict[str, Any]]) -> list[str]:
    return [f"{f['code']} {f['message']}" for f in findings if f["severity"] in {"warning", "error"}]


def by_code(findings: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f["code"]: f for f in findings}


def test_the_healthy_pipeline_has_no_finding_at_warning_or_above(runs: dict[str, Run]) -> None:
    result, findings, events = runs["healthy"]
    assert result.returncode == 0, result.stderr[-2000:]
    assert serious(findings) == []
    assert "RUN006" not in by_code(findings)  # the driver is the trainer, not pyspark.daemon
    tuning = [e["data"] for e in events if e.get("check") == "mllib_tuning"]
    assert len(tuning) == 1
    assert tuning[0]["tuner"] == "CrossValidator"
    assert tuning[0]["folds"] == 2
    assert len(tuning[0]["metrics"]) == 2
    assert set(tuning[0]["best_params"]) == {"LogisticRegression.regParam"}
    losses = [e["metrics"]["loss"] for e in events if e["kind"] == "step"]
    assert len(losses) >= 3
    assert losses[-1] < losses[0]


def test_a_scaler_fitted_before_random_split_is_dat014(runs: dict[str, Run]) -> None:
    result, findings, _ = runs["spark_submit"]
    assert result.returncode == 0, result.stderr[-2000:]
    found = by_code(findings)
    assert found["DAT014"]["severity"] == "error"
    assert found["DAT014"]["evidence"]["estimators"] == ["StandardScaler"]
    assert "TRN009" not in found  # the model itself was scored on held-out rows
    others = [code for code in serious(findings) if not code.startswith(("DAT014", "RUN006"))]
    assert others == []


def test_an_evaluator_scoring_the_training_dataframe_is_trn009(runs: dict[str, Run]) -> None:
    result, findings, _ = runs["evaluated_on_train"]
    assert result.returncode == 0, result.stderr[-2000:]
    found = by_code(findings)
    assert found["TRN009"]["evidence"]["estimator"] == "Pipeline"
    assert found["TRN009"]["evidence"]["evaluator"] == "BinaryClassificationEvaluator"
    assert "DAT014" not in found  # its scaler is a stage of the Pipeline fitted on the training part
    assert [code for code in serious(findings) if not code.startswith("TRN009")] == []


def test_spark_submit_is_followed_to_the_python_driver(runs: dict[str, Run]) -> None:
    result, findings, _events = runs["spark_submit"]
    assert result.returncode == 0, result.stderr[-2000:]
    found = by_code(findings)
    assert "DAT014" in found
    assert "RUN010" not in found
    launch = found["RUN006"]["evidence"]
    assert launch["launcher"] == "spark-submit (the Spark JVM)"
    (driver,) = launch["trainer_cmdlines"]  # not spark-submit's subshell or launcher JVM
    assert driver[-1].endswith("mllib_scaler_before_split.py")
    trainers = dict(zip(launch["trainer_pids"], launch["trainer_cmdlines"], strict=True))
    assert trainers[found["DAT014"]["pid"]][-1].endswith("mllib_scaler_before_split.py")
