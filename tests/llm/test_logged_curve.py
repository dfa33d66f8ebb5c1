"""Every value the HF Trainer logs is a curve point: a real SFTTrainer full fine-tune of the
tiny offline model, under the boot module as under `trainmedic run`, logging every 2 steps of 80.

The guard reads the loss at its checks, every 10 steps: a loss that blows up between two checks
and comes back down (the learning rate 100x too high for steps 16-18) leaves it 9 points, too few
for an episode. The Trainer's 40 logged losses show it: TRN002 with the episode's steps and peak.
The healthy twin (the same run at its constant learning rate) stays quiet, and its report counts
the Trainer's 80 steps and draws its 40 logged losses (after the guard's first step)."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from trainmedic.findings import Finding
from trainmedic.record import RunRecord, steps_per_second
from trainmedic.registry import run_rules
from trainmedic.report._html_plots import _step_series
from trainmedic.report.html import render_html

from ..helpers import InstrumentedRun, run_instrumented

pytest.importorskip("trl")

SCRIPT = Path(__file__).with_name("sft_schedules.py")
CASES = ("healthy", "spike")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, InstrumentedRun]:
    tmp = tmp_path_factory.mktemp("logged")

    def one(case: str) -> InstrumentedRun:
        folder = tmp / case
        folder.mkdir()
        env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        run = run_instrumented(["python", str(SCRIPT), case], folder, env=env, cwd=folder, timeout=600)
        assert run.result.returncode == 0, run.result.stderr[-3000:]
        return run

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(CASES, pool.map(one, CASES), strict=True))


@pytest.fixture(scope="module")
def findings(runs: dict[str, InstrumentedRun]) -> dict[str, list[Finding]]:
    return {case: run_rules(run.record) for case, run in runs.items()}


def _losses(record: RunRecord) -> list[tuple[int, float]]:
    return [(s.step, s.metrics["loss"]) for s in record.curve_steps if "loss" in s.metrics]


def test_every_logged_value_is_a_curve_point(runs: dict[str, InstrumentedRun]) -> None:
    record = runs["healthy"].record
    logged = [s for s in record.logged_steps if "loss" in s.metrics]
    assert [s.step for s in logged] == list(range(2, 81, 2))
    assert all(s.logged == "transformers" for s in logged)
    # the Trainer's other values and TRL's extra metrics are named curves too; its end-of-run
    # summary (train_runtime, the whole run's mean train_loss) is no point of a curve
    names = set().union(*(s.metrics for s in logged))
    assert {"grad_norm", "learning_rate", "mean_token_accuracy", "entropy"} <= names
    assert not {"train_runtime", "train_loss", "epoch", "train_steps_per_second"} & names
    # one curve per quantity: the Trainer's 40 losses, not the guard's 9 windows beside them,
    # headed by the guard's first (step 1: the untrained model, before the Trainer's first log)
    guard = [s.step for s in record.steps if "loss" in s.metrics]
    assert 3 <= len(guard) < 20
    assert guard[0] == 1
    assert [x for x, _ in _losses(record)] == [1, *range(2, 81, 2)]


def test_a_spike_between_checks_is_loss_divergence(
    runs: dict[str, InstrumentedRun], findings: dict[str, list[Finding]]
) -> None:
    found = [f for f in findings["spike"] if f.code == "TRN002"]
    assert len(found) == 1, [f.code for f in findings["spike"]]
    evidence = found[0].evidence
    assert evidence["recovered"] is True
    assert 16 <= evidence["episode_start_step"] <= evidence["peak_step"] <= 30
    assert 30 < evidence["episode_end_step"] < 80
    assert evidence["peak_loss"] > 15 > 5 > evidence["min_before"]
    # no guard check fell inside the blow-up at its worst: the guard's own windows alone miss it
    guard_only = RunRecord.of([e for e in runs["spike"].record.events if getattr(e, "logged", None) is None])
    assert "TRN002" not in [f.code for f in run_rules(guard_only)]


def test_the_healthy_twin_is_quiet(findings: dict[str, list[Finding]]) -> None:
    assert [f.code for f in findings["healthy"] if f.code.startswith("TRN")] == []


def test_the_report_counts_the_trainers_steps_and_draws_every_logged_loss(
    runs: dict[str, InstrumentedRun], findings: dict[str, list[Finding]]
) -> None:
    record = runs["healthy"].record
    assert record.steps_run == 80
    page = render_html(record, findings["healthy"])
    assert re.search(r"<b>80</b><span>steps</span>", page)
    assert re.search(r"<b>1</b><span>epochs</span>", page)  # 80 steps of 8 on 640 examples
    # the rate is the Trainer's own: HF's `train_steps_per_second` (steps over the training
    # loop's time) and the report's (steps between the guard's events, start-up apart) measure
    # the same loop; HF's holds the first step, the report's not (a wide margin, no speed asserted)
    printed = re.search(r"'train_steps_per_second': '?([0-9.]+)", runs["healthy"].result.stdout)
    assert printed is not None, runs["healthy"].result.stdout[-2000:]
    rate = steps_per_second(record.steps)
    assert rate is not None
    assert 0.7 < rate / float(printed.group(1)) < 2.0
    # the loss chart's points are the Trainer's 40 logged losses, at their steps (and step 1)
    assert _step_series(record)["loss"] == [(float(x), y) for x, y in _losses(record)]
    assert len(_losses(record)) == 41
