"""Table files in every format read alike; every bad file is one UsageError naming it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from trainmedic.data import read_table
from trainmedic.errors import UsageError

from .synth import clean_table


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".parquet", ".jsonl", ".json"])
def test_every_format_round_trips(tmp_path: Path, suffix: str) -> None:
    frame = clean_table(50, 0)
    path = tmp_path / f"train{suffix}"
    if suffix == ".csv":
        frame.to_csv(path, index=False)
    elif suffix == ".tsv":
        frame.to_csv(path, sep="\t", index=False)
    elif suffix == ".parquet":
        frame.to_parquet(path)
    elif suffix == ".jsonl":
        frame.to_json(path, orient="records", lines=True)
    else:
        frame.to_json(path, orient="records")
    back = read_table(path)
    assert list(back.columns) == list(frame.columns)
    assert len(back) == 50
    assert back["x0"].to_numpy() == pytest.approx(frame["x0"].to_numpy())


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (
            "mixed.csv",
            "a,b,y\n1,2,0\n3;4;1\n",
            r"mixed.csv: mixed delimiters: line 3 uses ';' where line 1 uses ','",
        ),
        ("semi.csv", "a;b;y\n1;2;0\n", r"semi.csv: line 1 is delimited by ';', not ','"),
        ("ragged.csv", "a,b,y\n1,2,0\n1,2\n", r"ragged.csv: line 3 has 2 fields, the header has 3"),
        ("empty.csv", "", r"empty.csv: is empty"),
        ("header.csv", "a,b,y\n", r"header.csv: has no rows"),
        ("data.xlsx", "x", r"data.xlsx: unknown table format '.xlsx'"),
        ("broken.parquet", "not parquet", r"broken.parquet: cannot read as parquet"),
        ("broken.jsonl", "{not json\n", r"broken.jsonl: cannot read as jsonl"),
    ],
)
def test_bad_files_name_the_file(tmp_path: Path, name: str, content: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(UsageError, match=message):
        read_table(path)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"nope.csv: no such file"):
        read_table(tmp_path / "nope.csv")
    with pytest.raises(UsageError, match=r"expected a folder of table files of one format \(found: none\)"):
        read_table(tmp_path)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_a_folder_of_part_files_is_one_table_in_file_name_order(tmp_path: Path, fmt: str) -> None:
    frame = clean_table(300, 0)
    parts = tmp_path / "train"
    parts.mkdir()
    (parts / "_SUCCESS").write_text("")  # what Spark and Hadoop leave beside the parts
    for number, rows in ((1, slice(100, 300)), (0, slice(0, 100))):
        part = frame.iloc[rows]
        path = parts / f"part-{number:05d}.{fmt}"
        part.to_parquet(path, index=False) if fmt == "parquet" else part.to_csv(path, index=False)
    read = read_table(parts)
    pd.testing.assert_frame_equal(read, frame, check_dtype=False)


def test_quoted_delimiters_are_not_mixed(tmp_path: Path) -> None:
    path = tmp_path / "quoted.csv"
    pd.DataFrame({"text": ["a, b", "c; d"], "y": [0, 1]}).to_csv(path, index=False)
    assert read_table(path)["text"].tolist() == ["a, b", "c; d"]
