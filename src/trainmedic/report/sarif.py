"""SARIF 2.1.0: findings as a static-analysis log for code-scanning dashboards.

GitHub code scanning, GitLab and most IDE viewers read SARIF. Each finding code
present becomes a `rule` (its documentation is the `trainmedic explain` text);
each finding a `result` whose `properties` keep the machine-readable evidence.
A finding that names a file gets a physical location; the others (a run that
was OOM-killed has no line of code to blame) are reported without one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, TextIO

from trainmedic._version import __version__
from trainmedic.errors import UsageError
from trainmedic.findings import Finding, FindingSpec, Severity, sort_findings
from trainmedic.registry import lookup
from trainmedic.report.explain import explain_text

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
VERSION = "2.1.0"
INFORMATION_URI = "https://github.com/trainmedic/trainmedic"
LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _spec(code: str) -> FindingSpec | None:
    try:
        return lookup(code)
    except UsageError:
        return None


def _rule(finding: Finding) -> dict[str, Any]:
    spec = _spec(finding.code)
    rule: dict[str, Any] = {
        "id": finding.code,
        "name": finding.slug,
        "defaultConfiguration": {"level": LEVEL[spec.severity if spec else finding.severity]},
        "properties": {"tags": [finding.code[:3]]},
    }
    if spec is not None:
        rule["shortDescription"] = {"text": spec.title}
        rule["fullDescription"] = {"text": spec.what}
        rule["help"] = {"text": explain_text(spec)}
        rule["helpUri"] = f"{INFORMATION_URI}/blob/main/docs/FINDINGS.md"
    return rule


def _result(finding: Finding, rule_index: int) -> dict[str, Any]:
    text = finding.message + (f" Fix: {finding.fix}" if finding.fix else "")
    data = finding.to_dict()
    result: dict[str, Any] = {
        "ruleId": finding.code,
        "ruleIndex": rule_index,
        "level": LEVEL[finding.severity],
        "message": {"text": text},
        "partialFingerprints": {
            "trainmedicFinding/v1": hashlib.sha256(
                f"{finding.code}|{finding.file}|{finding.rank}|{finding.message}".encode()
            ).hexdigest()[:32]
        },
        "properties": {
            k: data[k]
            for k in ("slug", "evidence", "fix", "pid", "rank", "step", "epoch")
            if data[k] is not None
        },
    }
    if finding.file:
        result["locations"] = [{"physicalLocation": {"artifactLocation": {"uri": finding.file}}}]
    return result


def sarif_log(findings: Sequence[Finding]) -> dict[str, Any]:
    """The SARIF document as a dict (one run, one tool: trainmedic)."""
    ordered = sort_findings(findings)
    rule_ids = list(dict.fromkeys(f.code for f in ordered))
    first = {code: next(f for f in ordered if f.code == code) for code in rule_ids}
    return {
        "$schema": SCHEMA,
        "version": VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "trainmedic",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "informationUri": INFORMATION_URI,
                        "rules": [_rule(first[code]) for code in rule_ids],
                    }
                },
                "results": [_result(f, rule_ids.index(f.code)) for f in ordered],
            }
        ],
    }


def render_sarif(findings: Sequence[Finding], out: TextIO) -> None:
    out.write(json.dumps(sarif_log(findings), indent=2, allow_nan=False) + "\n")
