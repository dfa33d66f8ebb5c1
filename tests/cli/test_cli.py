"""The real `trainmedic` command: exit codes and output lines together."""

from __future__ import annotations

import json
import re

from ..conftest import run_cli
from ..test_registry import catalogue


def test_version() -> None:
    result = run_cli("--version")
    assert result.returncode == 0
    assert re.fullmatch(r"trainmedic, version \d+\.\d+\.\d+\n", result.stdout)


def test_rules_json_lists_exactly_the_catalogue() -> None:
    result = run_cli("rules", "--format", "json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["rules"]
    assert [(r["code"], r["slug"]) for r in rows] == catalogue()
    assert {r["severity"] for r in rows} <= {"error", "warning", "info"}


def test_rules_text_table() -> None:
    result = run_cli("rules")
    assert result.returncode == 0
    assert re.search(r"RUN001\s+oom-killed\s+error\s+Killed by the OOM killer", result.stdout)


def test_explain_by_code_and_slug_print_the_same_documentation() -> None:
    by_code = run_cli("explain", "RUN001")
    by_slug = run_cli("explain", "oom-killed")
    assert by_code.returncode == by_slug.returncode == 0
    assert by_code.stdout == by_slug.stdout
    for heading in ("What it means", "Why it hurts", "Example", "Fix"):
        assert f"\n{heading}\n" in by_code.stdout


def test_explain_json() -> None:
    result = run_cli("explain", "tor005", "--format", "json")
    assert result.returncode == 0
    assert json.loads(result.stdout)["slug"] == "sampler-epoch-not-set"


def test_explain_unknown_exits_2_with_one_line() -> None:
    result = run_cli("explain", "NOPE")
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("trainmedic: error: unknown finding 'NOPE'")
    assert "Traceback" not in result.stderr


def test_unknown_option_and_command_exit_2_with_one_line() -> None:
    for args in (("--bogus",), ("nosuchcommand",), ("explain",), ("rules", "--format", "xml")):
        result = run_cli(*args)
        assert result.returncode == 2, args
        assert len(result.stderr.splitlines()) == 1, (args, result.stderr)
        assert result.stderr.startswith("trainmedic: error: ")
