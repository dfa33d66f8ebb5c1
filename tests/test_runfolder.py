"""The run folder's layout, as `run` creates folders and `report`, `diagnose` and the notebook find them."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainmedic import runfolder


def test_a_new_folder_per_run_named_after_the_script_and_suffixed_when_taken(tmp_path: Path) -> None:
    name = runfolder.default_name(["python", "scripts/train.py", "--epochs", "3"])
    assert name == "train"
    assert runfolder.default_name(["torchrun", "--nproc-per-node", "2"]) == "torchrun"
    first = runfolder.make_run_dir(None, "my run!", tmp_path)
    second = runfolder.make_run_dir(None, "my run!", tmp_path)
    assert first.parent == second.parent == tmp_path
    assert first.name.endswith("-my-run")
    assert second != first  # same second: suffixed, never shared
    assert second.is_dir()
    given = tmp_path / "given" / "deep"
    assert runfolder.make_run_dir(given, "ignored", tmp_path) == given
    assert given.is_dir()


def test_run_folders_are_those_with_a_manifest_and_a_run_folder_holds_events(tmp_path: Path) -> None:
    assert runfolder.run_folders(tmp_path / "absent") == []
    for name in ("b", "a", "started-only"):
        (tmp_path / name).mkdir()
    runfolder.write_json(tmp_path / "a" / runfolder.MANIFEST, {"name": "a"})
    runfolder.write_json(tmp_path / "b" / runfolder.MANIFEST, {"name": "b"})
    (tmp_path / "b" / runfolder.EVENTS).write_text("")
    assert runfolder.run_folders(tmp_path) == [tmp_path / "a", tmp_path / "b"]
    assert runfolder.is_run_folder(tmp_path / "b")
    assert not runfolder.is_run_folder(tmp_path / "a")


@pytest.mark.parametrize("content", [None, "", "{cut", "[1, 2]", "\udcff"])
def test_read_json_is_none_for_what_a_killed_writer_may_leave(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / runfolder.FINDINGS
    if content is not None:
        path.write_bytes(content.encode("utf-8", "surrogateescape"))
    assert runfolder.read_json(path) is None


def test_runs_base_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(runfolder.RUNS_DIR_ENV, raising=False)
    assert runfolder.runs_base() == Path("runs")
    monkeypatch.setenv(runfolder.RUNS_DIR_ENV, str(tmp_path))
    assert runfolder.runs_base() == tmp_path
