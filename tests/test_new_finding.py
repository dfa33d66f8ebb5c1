"""`make new-finding` (scripts/new_finding.py) on a copy of the repository: its four files, and a
finding that the registry finds and its place applies: the written tests, which pass as written,
reach it only through `run_rules` (the run's events) and `check data` (the data checks)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from trainmedic.registry import all_specs

REPO = Path(__file__).resolve().parents[1]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("new_finding", REPO / "scripts" / "new_finding.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _next(group: str) -> str:
    return f"{group}{max(int(s.code[3:]) for s in all_specs() if s.group == group) + 1:03d}"


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The parts of the repository the scaffold writes and the written tests read."""
    root = tmp_path_factory.mktemp("repo")
    shutil.copytree(REPO / "src", root / "src", ignore=shutil.ignore_patterns("__pycache__"))
    for part in ("benchmarks/failures/cases.toml", "docs/FINDINGS.md"):
        (root / part).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / part, root / part)
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def test_it_writes_four_files_that_import_register_and_pass(copy: Path) -> None:
    script = _script()
    events, data = _next("TRN"), _next("DAT")
    written = script.scaffold(copy, events, "some-new-failure", "run events")
    written += script.scaffold(copy, data, "some-table-failure", "data check")
    names = {str(p.relative_to(copy)) for p in written}
    assert names == {
        f"src/trainmedic/rules/trn/{events.lower()}_some_new_failure.py",
        f"tests/rules/trn/test_{events.lower()}_some_new_failure.py",
        f"src/trainmedic/rules/dat/{data.lower()}_some_table_failure.py",
        f"tests/rules/dat/test_{data.lower()}_some_table_failure.py",
        "benchmarks/failures/cases.toml",
        "docs/FINDINGS.md",
    }
    catalogue = (copy / "docs" / "FINDINGS.md").read_text()
    assert f"| {events} | `some-new-failure` |" in catalogue
    assert f"| {data} | `some-table-failure` |" in catalogue
    assert f"| {data} `some-table-failure` | TODO: how check_tables measures it" in catalogue
    assert f'must = ["{data}"]' in (copy / "benchmarks" / "failures" / "cases.toml").read_text()
    env = {**os.environ, "PYTHONPATH": f"{copy / 'src'}{os.pathsep}{REPO}"}
    tests = [str(p) for p in written if p.name.startswith("test_")]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        env=env,
        cwd=copy,
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


@pytest.mark.parametrize(
    ("code", "slug", "why"),
    [
        ("DAT21", "ok-slug", "must look like"),
        ("XYZ001", "ok-slug", "group must be"),
        ("TOR001", "new-slug", "already exists"),
        ("TOR900", "new-slug", "next code of its group"),
        ("TOR099", "Bad_Slug", "kebab-case"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    code: str, slug: str, why: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    root = tmp_path / "repo"
    shutil.copytree(REPO / "src" / "trainmedic" / "rules", root / "src" / "trainmedic" / "rules")
    assert _script().main([code, slug, "--root", str(root)]) == 2
    err = capsys.readouterr().err
    assert why in err
    assert err.count("\n") == 1
    assert not (root / "tests").exists()
