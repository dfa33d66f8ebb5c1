"""Bad input: one clear line and exit 2, or, for a file cut short, what is readable plus what was skipped."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.conftest import run_cli
from trainmedic.cli.main import main
from trainmedic.eventlog.writer import EventWriter
from trainmedic.events import Epoch, RunStart, Step


def write_history(path: Path, epochs: int = 6) -> Path:
    history = {
        "loss": [1.0 / (i + 1) for i in range(epochs)],
        "val_loss": [1.2 / (i + 1) for i in range(epochs)],
    }
    path.write_text(json.dumps(history))
    return path


def test_missing_path_is_one_line_exit_2(tmp_path: Path) -> None:
    result = run_cli("diagnose", str(tmp_path / "nope.json"))
    assert result.returncode == 2
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line == f"trainmedic: error: {tmp_path / 'nope.json'}: no such file or directory"


def test_unknown_format_names_what_is_expected(tmp_path: Path, capsys) -> None:
    odd = tmp_path / "notes.txt"
    odd.write_text("epoch 1 loss 0.3\n")
    assert main(["diagnose", str(odd)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "notes.txt: not a log format trainmedic reads" in err
    assert "trainer_state.json" in err


def test_truncated_history_json_exits_2(tmp_path: Path, capsys) -> None:
    path = write_history(tmp_path / "history.json")
    path.write_text(path.read_text()[:-25])
    assert main(["diagnose", str(path)]) == 2
    err = capsys.readouterr().err
    assert "the JSON ends early" in err
    assert err.count("\n") == 1


def test_truncated_trainer_state_keeps_complete_entries(tmp_path: Path, capsys) -> None:
    entries = [{"epoch": s / 10, "loss": 2.0 if s < 30 else math.nan, "step": s} for s in range(1, 41)]
    state = {"global_step": 40, "log_history": entries, "max_steps": 100, "num_train_epochs": 10}
    text = json.dumps(state, indent=2, sort_keys=True)
    cut = text.index('"step": 35') + 5
    path = tmp_path / "trainer_state.json"
    path.write_text(text[:cut])
    code = main(["diagnose", "--format", "json", str(path)])
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert code == 1
    assert doc["findings"][0]["code"] == "TRN001"
    assert doc["findings"][0]["step"] == 30
    assert "skipped" in captured.err
    assert "ends early" in captured.err
    assert doc["sources"][0]["skipped"]


def test_trainer_state_cut_before_any_entry_exits_2(tmp_path: Path, capsys) -> None:
    path = tmp_path / "trainer_state.json"
    path.write_text('{\n  "epoch": 1.0,\n  "global_step": 5,\n  "log_history": [\n    {"loss": 2.')
    assert main(["diagnose", str(path)]) == 2
    assert "no complete log_history entry" in capsys.readouterr().err


def test_event_file_cut_mid_record(tmp_path: Path, capsys) -> None:
    # tensorboard's own record writer (its EventFileWriter would import TensorFlow: seconds)
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter

    path = tmp_path / "events.out.tfevents.1.host"
    with path.open("wb") as handle:
        writer = RecordWriter(handle)
        writer.write(event_pb2.Event(wall_time=999.0, file_version="brain.Event:2").SerializeToString())
        for step in range(50):
            value = summary_pb2.Summary.Value(tag="loss", simple_value=1.0 / (step + 1))
            event = event_pb2.Event(
                step=step, wall_time=1000.0 + step, summary=summary_pb2.Summary(value=[value])
            )
            writer.write(event.SerializeToString())
    data = path.read_bytes()
    path.write_bytes(data[:-7])  # the writer was killed during its last record
    code = main(["diagnose", "--format", "json", str(path)])
    captured = capsys.readouterr()
    assert code == 0
    doc = json.loads(captured.out)
    assert doc["sources"][0]["points"] == 49
    assert "record cut mid-write" in captured.err

    path.write_bytes(data[:30])  # only the file_version record survives: nothing to diagnose
    assert main(["diagnose", str(path)]) == 2
    assert "nothing readable" in capsys.readouterr().err


def test_run_folder_is_replayed(tmp_path: Path, capsys) -> None:
    with EventWriter(tmp_path / "run" / "events.jsonl") as writer:
        writer.emit(RunStart(command=["python", "train.py"], t=1.0))
        for i, loss in enumerate([2.0, 1.5, 9.0, math.inf]):
            writer.emit(Step(step=i, epoch=0, metrics={"loss": loss}, t=2.0 + i))
        writer.emit(Epoch(epoch=0, t=9.0))
    with (tmp_path / "run" / "events.jsonl").open("a") as handle:
        handle.write('{"kind": "step", "step": 4, "metr')  # cut by a kill
    code, captured = main(["diagnose", str(tmp_path / "run")]), capsys.readouterr()
    assert code == 1
    assert "TRN001 nonfinite-loss [epoch 1, step 3]" in captured.out
    assert "last line was cut" in captured.err


def test_manifest_is_not_a_log(tmp_path: Path, capsys) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"python": {"version": "3.11"}, "packages": {}}))
    assert main(["diagnose", str(path)]) == 2
    assert "trainmedic diff" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--expect-epochs=0", "--format=xml"])
def test_bad_options_exit_2(tmp_path: Path, flag: str) -> None:
    assert main(["diagnose", flag, str(write_history(tmp_path / "h.json"))]) == 2


def test_hf_output_folder_reads_its_latest_checkpoint(tmp_path: Path) -> None:
    from trainmedic.diagnose import load

    for step in (5, 10, 9):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        entries = [{"epoch": s / 5, "loss": 1.0 / s, "step": s} for s in range(1, step + 1)]
        state = {"global_step": step, "log_history": entries, "max_steps": 20, "num_train_epochs": 4}
        (folder / "trainer_state.json").write_text(json.dumps(state))
    [read] = load([tmp_path]).reads
    assert read.path == tmp_path / "checkpoint-10" / "trainer_state.json"
    assert read.points == 10
