"""Lightning and the Hugging Face Trainer, real and tiny (random weights, no download), under the boot module.

One interpreter runs every case (each framework imports once); the Guard
callback is added automatically, or passed explicitly for in-process findings.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainmedic.events import Epoch, Metric, Step, TrainingPlan
from trainmedic.findings import Severity
from trainmedic.record import RunRecord
from trainmedic.registry import run_rules

from ..helpers import InstrumentedRun, records_by_case, run_instrumented
from .conftest import SINGLE_THREAD

HERE = Path(__file__).resolve().parent
CASES = {
    "lightning/frozen_parameters": "TOR001",
    "hf/softmax_into_crossentropy": "TOR004",
    "lightning/clipping_saturated": "TRN010",
    "hf/clipping_saturated": "TRN010",
}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> InstrumentedRun:
    cases = [f"{path}:{variant}:{how}" for path in CASES for variant, how in
             (("bug", "auto"), ("fixed", "auto"), ("bug", "explicit"), ("fixed", "explicit"))]  # fmt: skip
    result = run_instrumented(
        ["python", str(HERE / "run_frameworks.py"), *cases],
        tmp_path_factory.mktemp("frameworks"),
        env=SINGLE_THREAD,
        timeout=280,
    )
    assert result.result.returncode == 0, result.result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def records(run: InstrumentedRun) -> dict[str, RunRecord]:
    return records_by_case(run.record)


@pytest.fixture(scope="module")
def printed(run: InstrumentedRun) -> dict[str, dict]:
    lines = [json.loads(line) for line in run.result.stdout.splitlines() if line.startswith("{")]
    return {line["case"]: line for line in lines}


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(CASES))
def test_bug_found_under_run_and_in_process_and_fix_is_clean(path: str, records, printed) -> None:
    code = CASES[path]
    for how in ("auto", "explicit"):
        bug = run_rules(records[f"{path}:bug:{how}"])
        assert code in {f.code for f in bug}, bug
        fixed = run_rules(records[f"{path}:fixed:{how}"])
        assert [f for f in fixed if f.severity.at_least(Severity.WARNING)] == [], fixed
    assert code in printed[f"{path}:bug:explicit"]["findings"]
    assert printed[f"{path}:fixed:explicit"]["findings"] == []


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(CASES))
def test_guard_callback_is_added_once_and_reports_epochs(path: str, records, printed) -> None:
    framework = path.split("/", maxsplit=1)[0]
    assert printed[f"{path}:fixed:auto"]["guards"] == [f"trainmedic.{framework}"]
    assert printed[f"{path}:fixed:explicit"]["guards"] == [f"trainmedic.{framework}"]
    record = records[f"{path}:fixed:auto"]
    (plan,) = record.of_type(TrainingPlan)
    assert plan.framework == {"lightning": "lightning", "hf": "transformers"}[framework]
    assert plan.epochs == 3
    assert record.epochs_requested == 3
    assert record.epochs_completed == 3
    assert [e.epoch for e in record.of_type(Epoch)] == [0, 1, 2]  # the framework's, not the loader's
    assert all("loss" in e.metrics for e in record.of_type(Epoch))
    val = [v for _, v in record.metric_series("val_loss")]
    assert len(val) == 3
    assert val[-1] < val[0]
    assert {s.epoch for s in record.of_type(Step)} == {0, 1, 2}


def test_hf_eval_losses_are_metrics_per_epoch(records) -> None:
    metrics = records["hf/softmax_into_crossentropy:fixed:auto"].of_type(Metric)
    evaluated = [(m.name, m.epoch) for m in metrics if m.name != "grad_norm_preclip"]  # HF clips by default
    assert evaluated == [("val_loss", 0), ("val_loss", 1), ("val_loss", 2)]


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["lightning", "hf"])
def test_clipping_that_hides_a_too_high_learning_rate_is_reported_with_the_pre_clip_norms(
    framework: str, records
) -> None:
    """`gradient_clip_val=1.0` / `max_grad_norm=1.0`, learning rate 10,000x too high."""
    (finding,) = [
        f for f in run_rules(records[f"{framework}/clipping_saturated:bug:auto"]) if f.code == "TRN010"
    ]
    assert finding.evidence["threshold"] == 1.0
    assert finding.evidence["engaged_share"] >= 0.9
    assert finding.evidence["median_preclip_norm"] >= 10
    steps = records[f"{framework}/clipping_saturated:bug:auto"].steps
    applied = [s.metrics["grad_norm"] for s in steps if "grad_norm" in s.metrics]
    assert applied
    assert max(applied) <= 1.0 + 1e-6  # what the optimizer received: the threshold, at most
    healthy = records[f"{framework}/clipping_saturated:fixed:auto"]
    reads = [o.data for o in healthy.guard_observations if o.check == "clipping"]
    assert sum(r["engaged"] for r in reads) > 0  # clipping engaged in the healthy run too, then rarely
