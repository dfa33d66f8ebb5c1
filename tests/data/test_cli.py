"""The real `trainmedic check data` / `check contract` commands: exit codes and output together."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from ..conftest import run_cli
from .images import write_folder
from .synth import clean_splits, clean_table


@pytest.fixture
def clean_files(tmp_path: Path) -> Path:
    train, val, test = clean_splits(1500)
    train.to_csv(tmp_path / "train.csv", index=False)
    val.to_parquet(tmp_path / "val.parquet")
    test.to_json(tmp_path / "test.jsonl", orient="records", lines=True)
    return tmp_path


@pytest.mark.slow
def test_clean_data_exits_0_with_the_summary_first(clean_files: Path) -> None:
    result = run_cli(
        "check",
        "data",
        str(clean_files / "train.csv"),
        "--val",
        str(clean_files / "val.parquet"),
        "--test",
        str(clean_files / "test.jsonl"),
        "--label",
        "y",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"trainmedic check data: {clean_files / 'train.csv'}"
    assert lines[1] == "  rows: train 1,500, val 375, test 375"
    assert lines[2].startswith("  columns: 11 (10 features: 8 number, 2 text)")
    assert lines[3].startswith("  label 'y': 2 classes: ")
    assert "No findings." in result.stdout


@pytest.mark.slow
def test_overlap_exits_1_and_json_is_stable(clean_files: Path) -> None:
    train = pd.read_csv(clean_files / "train.csv")
    val = pd.read_parquet(clean_files / "val.parquet")
    pd.concat([val, train.iloc[:30]]).to_parquet(clean_files / "val.parquet")
    args = [
        "check",
        "data",
        str(clean_files / "train.csv"),
        "--val",
        str(clean_files / "val.parquet"),
        "--label",
        "y",
        "--no-label-noise",
    ]
    text = run_cli(*args)
    assert text.returncode == 1
    assert "ERROR   DAT001 split-overlap" in text.stdout
    assert "30 of 405 val rows (7.4%) have features identical to a train row" in text.stdout
    result = run_cli(*args, "--format", "json")
    assert result.returncode == 1
    document = json.loads(result.stdout)
    assert document["summary"]["rows"] == {"train": 1500, "val": 405}
    (finding,) = document["findings"]
    assert (finding["code"], finding["slug"], finding["evidence"]["rows"]) == ("DAT001", "split-overlap", 30)


@pytest.mark.slow
def test_fail_on_warning(tmp_path: Path) -> None:
    train = clean_table(1500, 0)
    pd.concat([train, train.iloc[:10]]).to_csv(tmp_path / "train.csv", index=False)  # DAT007 warning
    args = ["check", "data", str(tmp_path / "train.csv"), "--label", "y", "--no-label-noise"]
    assert run_cli(*args).returncode == 0
    warned = run_cli(*args, "--fail-on", "warning")
    assert warned.returncode == 1
    assert "WARNING DAT007 duplicate-rows" in warned.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["{d}/train.csv", "--label", "lable"],
            "--label 'lable' is not a column of train; did you mean 'label'?",
        ),
        (["{d}/nope.csv", "--label", "label"], "{d}/nope.csv: no such file"),
        (["{d}/train.csv", "--val", "{d}/empty.csv", "--label", "label"], "{d}/empty.csv: has no rows"),
        (["{d}/mixed.csv", "--label", "label"], "{d}/mixed.csv: mixed delimiters: line 3 uses ';'"),
        (["{d}/train.csv", "--label", "label", "--group", "gruop"], "--group 'gruop' is not a column"),
        (["{d}/imgs", "--images"], "{d}/imgs/a/bad.png: cannot decode the image"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "train.csv").write_text("x,group,label\n1,a,0\n2,b,1\n")
    (tmp_path / "empty.csv").write_text("x,group,label\n")
    (tmp_path / "mixed.csv").write_text("x,group,label\n1,a,0\n2;b;1\n")
    write_folder(tmp_path / "imgs", {"a": [1]})
    (tmp_path / "imgs" / "a" / "bad.png").write_bytes(b"\x89PNG broken")
    result = run_cli("check", "data", *[a.format(d=tmp_path) for a in args], cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("trainmedic: error: ")
    assert message.format(d=tmp_path) in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.csv", "imgs", "mixed.csv", "train.csv"]


@pytest.mark.slow
def test_images_cli(tmp_path: Path) -> None:
    write_folder(tmp_path / "train", {"cat": list(range(20)), "dog": list(range(20, 40))})
    write_folder(tmp_path / "val", {"cat": [1, 2, 50], "dog": [60]})
    result = run_cli("check", "data", str(tmp_path / "train"), "--val", str(tmp_path / "val"), "--images")
    assert result.returncode == 1
    assert "2 of 4 val rows (50.0%) have features identical to a train row" in result.stdout
    assert "note: train image sizes: 32x32 (40)" in result.stdout


@pytest.mark.slow
def test_check_contract_cli(tmp_path: Path) -> None:
    from trainmedic import contract

    contract.capture(clean_table(300, 0), label="y").save(tmp_path / "contract.json")
    clean_table(100, 1).to_csv(tmp_path / "ok.csv", index=False)
    clean_table(100, 1)[["x1", "x0"]].to_csv(tmp_path / "bad.csv", index=False)
    ok = run_cli("check", "contract", str(tmp_path / "contract.json"), str(tmp_path / "ok.csv"))
    assert (ok.returncode, "No findings." in ok.stdout) == (0, True)
    bad = run_cli(
        "check", "contract", str(tmp_path / "contract.json"), str(tmp_path / "bad.csv"), "--format", "json"
    )
    assert bad.returncode == 1
    assert {f["code"] for f in json.loads(bad.stdout)["findings"]} == {"DAT013"}
    missing = run_cli("check", "contract", str(tmp_path / "nope.json"), str(tmp_path / "ok.csv"))
    assert (missing.returncode, missing.stderr.count("\n")) == (2, 1)
    assert "nope.json: no such contract file" in missing.stderr


def test_check_group_lists_its_subcommands() -> None:
    result = run_cli("check", "--help")
    assert result.returncode == 0
    assert "contract" in result.stdout
    assert "data" in result.stdout
