"""`trainmedic diagnose` on logs written by real training runs (see make_logs.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from trainmedic.cli.main import main
from trainmedic.diagnose import load
from trainmedic.events import Epoch, MetricSeries, TrainingPlan
from trainmedic.registry import all_rules, run_rules

# The session fixture trains four tiny models once (about 90 CPU seconds in all); the first test
# that needs it pays for it, so these tests get more than the suite's default 300 s timeout.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def diagnose_json(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, dict]:
    code = main(["diagnose", "--format", "json", *map(str, args)])
    out = capsys.readouterr().out
    return code, json.loads(out)


def codes(doc: dict) -> list[str]:
    return [f["code"] for f in doc["findings"]]


def test_healthy_logs_of_every_framework_give_no_warning(real_logs: Path, capsys) -> None:
    healthy = [
        real_logs / "keras/healthy/history.json",
        real_logs / "keras/healthy/training.csv",
        real_logs / "keras/healthy/tb",
        real_logs / "lightning/healthy",
        real_logs / "hf/healthy",
        real_logs / "tensorboard/healthy",
    ]
    for path in healthy:
        code, doc = diagnose_json(capsys, path)
        assert (code, codes(doc)) == (0, []), path
        assert doc["sources"][0]["points"] > 0


def test_keras_formats_agree_on_the_nan_epoch(real_logs: Path, capsys) -> None:
    nan = real_logs / "keras/nan"
    for path in (nan / "history.json", nan / "training.csv", nan / "tb"):
        code, doc = diagnose_json(capsys, path)
        assert code == 1, path
        first = doc["findings"][0]
        assert first["code"] == "TRN001", path
        assert first["epoch"] == 1, path  # lr=1e8: the first epoch's loss is already NaN


def test_keras_tensorboard_scalars_are_tensor_summaries_read_per_epoch(real_logs: Path) -> None:
    record = load([real_logs / "keras/healthy/tb"]).record
    series = {s.name: s for s in record.of_type(MetricSeries)}
    assert series["train/epoch_loss"].per == "epoch"
    assert list(series["train/epoch_loss"].steps) == list(range(8))
    assert len(series["validation/epoch_loss"].values) == 8
    assert record.epochs_completed == 8


def test_keras_history_with_expected_epochs_carries_the_plan_for_ker003(real_logs: Path) -> None:
    record = load([real_logs / "keras/healthy/history.json"], expect_epochs=12).record
    [plan] = record.of_type(TrainingPlan)
    assert (plan.framework, plan.epochs) == ("keras", 12)
    assert record.epochs_completed == 8
    found = run_rules(record)
    assert "RUN004" not in [f.code for f in found]  # KER003 owns Keras logs (rules/ker/)
    producers = {rule.__module__ for rule in all_rules()}
    if "trainmedic.rules.ker.ker003_history_epochs_mismatch" not in producers:
        pytest.skip("KER003's rule lands with the keras branch")
    assert "KER003" in [f.code for f in found]


def test_lightning_overfitting_gives_the_turning_epoch(real_logs: Path, capsys) -> None:
    code, doc = diagnose_json(capsys, real_logs / "lightning/overfit")
    assert code == 0  # a warning: below the default --fail-on error
    [finding] = [f for f in doc["findings"] if f["code"] == "TRN004"]
    ev = finding["evidence"]
    assert ev["val_end"] > ev["val_at_turn"] * 1.1
    assert ev["train_end"] < ev["train_at_turn"]
    assert finding["epoch"] == ev["turn_epoch"]
    assert f"epoch {ev['turn_epoch']}" in finding["message"]


def test_lightning_reads_epoch_and_step_columns_apart(real_logs: Path) -> None:
    record = load([real_logs / "lightning/healthy"]).record
    epochs = record.of_type(Epoch)
    assert len(epochs) == 6
    assert {"val_loss", "train_loss_epoch"} <= set(epochs[-1].metrics)
    [step_series] = [s for s in record.of_type(MetricSeries) if s.name == "train_loss_step"]
    assert step_series.epochs is not None
    assert list(step_series.epochs)[-1] == 5


def test_lightning_with_fewer_epochs_than_expected_warns(real_logs: Path, capsys) -> None:
    code, doc = diagnose_json(capsys, real_logs / "lightning/healthy", "--expect-epochs", "10")
    [finding] = doc["findings"]
    assert (finding["code"], finding["severity"]) == ("RUN004", "warning")
    assert finding["evidence"]["epochs_completed"] == 6
    assert code == 0


def test_hf_run_stopped_by_a_callback_is_a_silent_early_exit(real_logs: Path, capsys) -> None:
    code, doc = diagnose_json(capsys, real_logs / "hf/stopped/trainer_state.json")
    assert code == 1
    [finding] = doc["findings"]
    assert (finding["code"], finding["slug"], finding["step"]) == ("RUN004", "silent-early-exit", 6)
    assert finding["evidence"]["max_steps"] == 18
    assert finding["evidence"]["epochs_requested"] == 3


def test_hf_healthy_has_train_and_eval_curves(real_logs: Path) -> None:
    record = load([real_logs / "hf/healthy"]).record
    names = {s.name for s in record.of_type(MetricSeries)}
    assert {"loss", "eval_loss", "grad_norm", "learning_rate"} <= names
    assert record.epochs_completed == 3


def test_restart_folders_merge_in_time_order(real_logs: Path, capsys) -> None:
    diverge = real_logs / "tensorboard/diverge"
    code, doc = diagnose_json(capsys, diverge / "run2", diverge / "run1")
    assert code == 1
    [finding] = [f for f in doc["findings"] if f["code"] == "TRN002"]
    assert finding["evidence"]["min_step"] < 140  # the minimum lies where run1 ends and run2 begins
    assert finding["evidence"]["end_step"] == 239
    assert len(doc["sources"]) == 2


def test_parent_logdir_of_a_run_and_its_restart_reads_like_the_two_folders(real_logs: Path, capsys) -> None:
    code, doc = diagnose_json(capsys, real_logs / "tensorboard/diverge")
    assert code == 1
    [finding] = [f for f in doc["findings"] if f["code"] == "TRN002"]
    assert finding["evidence"]["end_step"] == 239
    assert [Path(s["path"]).name for s in doc["sources"]] == ["run1", "run2"]


def test_independent_runs_in_one_logdir_are_not_merged(real_logs: Path, tmp_path: Path, capsys) -> None:
    """Two runs that both start at step 0 are two experiments, not a restart: tags keep their folder."""
    for name in ("lr-0.1", "lr-0.01"):
        shutil.copytree(real_logs / "tensorboard/healthy", tmp_path / "logs" / name)
    code, doc = diagnose_json(capsys, tmp_path / "logs")
    assert code == 0
    assert len(doc["sources"]) == 1


def test_text_output_names_the_sources(real_logs: Path, capsys) -> None:
    assert main(["diagnose", str(real_logs / "hf/healthy")]) == 0
    out = capsys.readouterr().out
    assert "(hf-trainer-state)" in out
    assert "No findings." in out


def test_diff_of_two_real_keras_runs(real_logs: Path, capsys) -> None:
    good, bad = real_logs / "keras/healthy/history.json", real_logs / "keras/nan/history.json"
    assert main(["diff", "--format", "json", str(good), str(bad)]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {row["metric"]: row for row in doc["metrics"]}
    assert rows["loss"]["departs_at"] == 1  # B is NaN from its first epoch (counted from 1)
    assert rows["loss"]["b_final"] is None
    assert doc["findings"] == []  # no manifests: the environment is not compared
