"""`--format github` (Actions annotations) and `--format sarif` (SARIF 2.1.0), through `render`."""

from __future__ import annotations

import io
import json
import random
import re
from typing import Any

import pytest

from trainmedic.findings import Finding, Severity
from trainmedic.registry import lookup
from trainmedic.report import OutputFormat, render

from ..conftest import run_cli

# The properties SARIF 2.1.0 allows on the objects trainmedic writes (sarif-schema-2.1.0.json
# sets additionalProperties: false on them), and the ones it requires.
ALLOWED = {
    "log": {"$schema", "version", "runs", "inlineExternalProperties", "properties"},
    "run": {"tool", "results", "invocations", "artifacts", "columnKind", "automationDetails", "properties"},
    "tool": {"driver", "extensions", "properties"},
    "driver": {
        "name", "version", "semanticVersion", "informationUri", "rules", "organization",
        "fullName", "shortDescription", "fullDescription", "downloadUri", "properties",
    },
    "rule": {
        "id", "name", "shortDescription", "fullDescription", "defaultConfiguration", "help",
        "helpUri", "messageStrings", "deprecatedIds", "guid", "relationships", "properties",
    },
    "result": {
        "ruleId", "ruleIndex", "rule", "kind", "level", "message", "locations", "partialFingerprints",
        "fingerprints", "relatedLocations", "guid", "rank", "properties",
    },
}  # fmt: skip
LEVELS = {"none", "note", "warning", "error"}


def findings() -> list[Finding]:
    return [
        lookup("RUN001").finding(
            "Killed by the OOM killer at 5.8 GiB during evaluation (epoch 3)",
            evidence={"peak_rss_bytes": 6_227_702_579, "limit_bytes": 6 * 2**30, "phase": "eval"},
            pid=4242,
            epoch=3,
        ),
        lookup("TRN001").finding("Loss became nan at step 37", evidence={"first_step": 37}, step=37, rank=0),
        lookup("DAT001").finding(
            "12% of val rows: also in train, 100%, a: b, c",
            evidence={"rows": 412},
            file="data/val,2024:v1.csv",
            severity=Severity.WARNING,
        ),
    ]


def rendered(fmt: OutputFormat, items: list[Finding]) -> str:
    out = io.StringIO()
    render(items, fmt, out)
    return out.getvalue()


def unescape(value: str) -> str:
    return (
        value.replace("%0D", "\r")
        .replace("%0A", "\n")
        .replace("%3A", ":")
        .replace("%2C", ",")
        .replace("%25", "%")
    )


def test_github_annotations_one_line_each_and_round_trip() -> None:
    lines = rendered(OutputFormat.GITHUB, findings()).splitlines()
    assert len(lines) == 3
    parsed = []
    for line in lines:
        match = re.fullmatch(r"::(error|warning|notice) ([^:]*)::(.*)", line)
        assert match, line
        props = dict(p.split("=", 1) for p in match.group(2).split(","))
        parsed.append((match.group(1), {k: unescape(v) for k, v in props.items()}, unescape(match.group(3))))
    (cmd0, props0, msg0), (cmd1, props1, msg1), (cmd2, props2, msg2) = parsed
    assert (cmd0, props0) == ("error", {"title": "RUN001 oom-killed"})
    assert msg0.splitlines()[0] == "Killed by the OOM killer at 5.8 GiB during evaluation (epoch 3) [epoch 3]"
    assert msg0.splitlines()[1].startswith("Fix: Look at the phase it died in")
    assert (cmd1, props1["title"]) == ("error", "TRN001 nonfinite-loss")
    assert msg1.startswith("Loss became nan at step 37 [rank 0, step 37]\nFix: ")
    assert (cmd2, props2) == (
        "warning",
        {"file": "data/val,2024:v1.csv", "title": f"DAT001 {lookup('DAT001').slug}"},
    )
    assert msg2.startswith("12% of val rows: also in train, 100%, a: b, c\nFix: ")


def test_github_no_findings_prints_nothing() -> None:
    assert rendered(OutputFormat.GITHUB, []) == ""


def check_keys(obj: dict[str, Any], kind: str, required: set[str]) -> None:
    assert set(obj) <= ALLOWED[kind], (kind, set(obj) - ALLOWED[kind])
    assert required <= set(obj), (kind, required - set(obj))


def validate_sarif(log: dict[str, Any]) -> None:
    """The SARIF 2.1.0 constraints on everything trainmedic writes."""
    check_keys(log, "log", {"version", "runs"})
    assert log["version"] == "2.1.0"
    (run,) = log["runs"]
    check_keys(run, "run", {"tool"})
    check_keys(run["tool"], "tool", {"driver"})
    driver = run["tool"]["driver"]
    check_keys(driver, "driver", {"name"})
    ids = [rule["id"] for rule in driver["rules"]]
    assert len(ids) == len(set(ids))
    for rule in driver["rules"]:
        check_keys(rule, "rule", {"id"})
        assert rule["defaultConfiguration"]["level"] in LEVELS
        for key in ("shortDescription", "fullDescription", "help"):
            assert isinstance(rule[key]["text"], str)
            assert rule[key]["text"]
        tags = rule["properties"]["tags"]
        assert len(tags) == len(set(tags))
    for result in run["results"]:
        check_keys(result, "result", {"message"})
        assert result["message"]["text"]
        assert result["level"] in LEVELS
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
        assert all(isinstance(v, str) for v in result["partialFingerprints"].values())
        for location in result.get("locations", []):
            assert set(location) == {"physicalLocation"}
            assert isinstance(location["physicalLocation"]["artifactLocation"]["uri"], str)


def test_sarif_is_valid_2_1_0_and_keeps_the_evidence() -> None:
    log = json.loads(rendered(OutputFormat.SARIF, findings()))
    validate_sarif(log)
    results = log["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == ["RUN001", "TRN001", "DAT001"]
    assert [r["level"] for r in results] == ["error", "error", "warning"]
    assert results[0]["properties"]["evidence"]["peak_rss_bytes"] == 6_227_702_579
    assert results[0]["properties"]["epoch"] == 3
    assert "locations" not in results[0]  # an OOM kill has no line of code to point at
    assert results[2]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "data/val,2024:v1.csv"
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert rules[0]["name"] == "oom-killed"
    assert "What it means" in rules[0]["help"]["text"]


def test_sarif_without_findings_is_a_valid_empty_run() -> None:
    log = json.loads(rendered(OutputFormat.SARIF, []))
    validate_sarif(log)
    assert log["runs"][0]["results"] == []


def test_a_finding_code_this_version_does_not_know_still_renders() -> None:
    newer = Finding(code="ZZZ999", slug="from-the-future", severity=Severity.INFO, message="m")
    log = json.loads(rendered(OutputFormat.SARIF, [newer]))
    assert log["runs"][0]["tool"]["driver"]["rules"][0] == {
        "id": "ZZZ999",
        "name": "from-the-future",
        "defaultConfiguration": {"level": "note"},
        "properties": {"tags": ["ZZZ"]},
    }
    assert rendered(OutputFormat.GITHUB, [newer]) == "::notice title=ZZZ999 from-the-future::m\n"


@pytest.mark.slow
def test_commands_that_print_findings_take_github_and_sarif(tmp_path) -> None:
    """The real `check data` on splits that share rows: the same findings and exit code in both."""
    rng = random.Random(0)
    rows = [f"{i},{rng.random()},{rng.random()},{rng.randint(0, 1)}\n" for i in range(200)]
    (tmp_path / "train.csv").write_text("id,x1,x2,y\n" + "".join(rows[:150]))
    (tmp_path / "val.csv").write_text("id,x1,x2,y\n" + "".join(rows[100:]))  # 50 rows in both
    args = ("check", "data", "train.csv", "--val", "val.csv", "--label", "y", "--format")
    github = run_cli(*args, "github", cwd=tmp_path)
    sarif = run_cli(*args, "sarif", cwd=tmp_path)
    assert github.returncode == sarif.returncode == 1, sarif.stderr
    log = json.loads(sarif.stdout)
    validate_sarif(log)
    codes = [r["ruleId"] for r in log["runs"][0]["results"]]
    assert "DAT001" in codes
    assert [re.match(r"::\w+ title=(\w+) ", line).group(1) for line in github.stdout.splitlines()] == codes


def test_text_reads_the_same_plain_and_in_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    """Piped output is written without rich; on a terminal (FORCE_COLOR here) rich adds colour
    and nothing else."""
    from trainmedic.report.text import render_text

    findings = [
        lookup("TRN003").finding("Loss did not decrease", evidence={"start_loss": 0.7, "curve": [1, 2]}),
        lookup("RUN001").finding("OOM-killed", evidence={"peak_bytes": 1 << 30}, rank=1, pid=42),
    ]
    plain = io.StringIO()
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    render_text(findings, plain, title="trainmedic diagnose")
    monkeypatch.setenv("FORCE_COLOR", "1")
    coloured = io.StringIO()
    render_text(findings, coloured, title="trainmedic diagnose")
    assert "\x1b[" not in plain.getvalue()
    assert "\x1b[" in coloured.getvalue()
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured.getvalue()) == plain.getvalue()
    assert "ERROR   RUN001 oom-killed [rank 1, pid 42]" in plain.getvalue()
    assert plain.getvalue().endswith("1 error, 1 warning, 0 infos\n")
