"""`make new-finding CODE=DAT021 SLUG=constant-feature`: the four files of a new finding.

In the spirit of ruff's `scripts/add_rule.py`: it writes

1. the finding's file, `src/trainmedic/rules/<group>/<code>_<slug>.py`, from a template that
   imitates `rules/tor/tor012_adapters_not_learning.py` (docstring naming the collector and the
   evidence, thresholds with their reasons, the SPEC with its executable example and where it is
   decided, a pure `judge`, `message`);
2. its test, `tests/rules/<group>/test_<code>_<slug>.py`: one triggering and one healthy input;
3. its failure-benchmark stub, a `[[case]]` in `benchmarks/failures/cases.toml`, left out of
   the gate until it reproduces the failure for real;
4. `docs/FINDINGS.md`, regenerated (a data check's `measured` and `reported_when` make its
   row in the DAT table "what is checked, and how", which docs/data.md links to).

The registry finds the file by its name and derives from its `decided_in` what applies it, so
no list elsewhere names it. `--place` picks the template: "run events" (a guard observation
worded by an event rule) or "data check" (the file measures the training table itself).
Everything the author must write is marked TODO. Bad input: one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GROUPS = ("RUN", "TRN", "KER", "TOR", "DAT", "CFG", "ENV")
TEMPLATES = ("run events", "data check")
_CODE = re.compile(r"^[A-Z]{3}[0-9]{3}$")
_SLUG = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_FILE = re.compile(r"^([a-z]{3}[0-9]{3})_([a-z0-9_]+)\.py$")


class BadInput(Exception):
    """What the user must fix, in one line."""


def validate(root: Path, code: str, slug: str, place: str) -> None:
    if not _CODE.match(code):
        raise BadInput(f"CODE {code!r} must look like DAT021 (three capitals, three digits)")
    if code[:3] not in GROUPS:
        raise BadInput(f"CODE {code!r}: the group must be one of {', '.join(GROUPS)}")
    if not _SLUG.match(slug):
        raise BadInput(f"SLUG {slug!r} must be kebab-case, like constant-feature")
    if place not in TEMPLATES:
        raise BadInput(f"--place {place!r} must be one of: {', '.join(TEMPLATES)}")
    if place == "data check" and code[:3] != "DAT":
        raise BadInput(f"a data check is a DAT finding, not {code}")
    taken = [
        _FILE.match(path.name)
        for path in (root / "src" / "trainmedic" / "rules").glob("[a-z][a-z][a-z]/*.py")
    ]
    for match in filter(None, taken):
        if match[1] == code.lower():
            raise BadInput(f"{code} already exists: {match[0]}")
        if match[2] == slug.replace("-", "_"):
            raise BadInput(f"slug {slug!r} already exists: {match[0]}")
    group = [int(m[1][3:]) for m in filter(None, taken) if m[1][:3] == code[:3].lower()]
    if group and int(code[3:]) != max(group) + 1:
        raise BadInput(
            f"{code}: a new finding takes the next code of its group, {code[:3]}{max(group) + 1:03d}"
        )


# -- templates ----------------------------------------------------------------------------------
RUN_EVENTS = '''"""{code} `{slug}`: TODO one line: what is wrong.

Collector: TODO the collector that measures it (e.g. the PyTorch guard, `trainmedic.torch`),
how it measures, and the `GuardObservation(check=OBSERVATION)` it sends: `count` of `total` TODO
(what they count). It measures, and `judge` decides; the rule words it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmedic.events import Event
from trainmedic.findings import FindingSpec, Severity
from trainmedic.record import Rule
from trainmedic.rules._helpers.guard import observation_rule, observed

#: The observation this finding words.
OBSERVATION = "{snake}"

# TODO: why this value holds in general (never because of one example).
SHARE = 0.5


def _example() -> list[Event]:
    """TODO: the smallest observation a real failing run sends."""
    return observed(OBSERVATION, count=8, total=10)


SPEC = FindingSpec(
    code="{code}",
    slug="{slug}",
    severity=Severity.WARNING,
    title="TODO a short title",
    what="TODO: what is wrong, in the framework's terms, and what trainmedic measures.",
    why="TODO: what it costs the run, and why it is not caught otherwise.",
    example="TODO: the smallest code that shows it.",
    fix="TODO: the fix, in the framework's own terms.",
    decided_in=("run events",),
    example_input=_example,
)


def judge(count: int, total: int) -> bool:
    """Whether `count` of `total` is the failure (the collector sends OBSERVATION when it is)."""
    return total > 0 and count >= SHARE * total


def message(evidence: Mapping[str, Any]) -> str:
    return f"{{evidence.get('count')}} of {{evidence.get('total')}} TODO: the measured facts"


RULES: tuple[Rule, ...] = (observation_rule(SPEC, OBSERVATION, message),)
'''

DATA_CHECK = '''"""{code} `{slug}`: TODO one line: what is wrong with the data.

Collector: this file's `check_tables(data)`, which `trainmedic check data` runs on the training
split (pandas; on a DuckDB or Spark engine, on its seeded sample): TODO what it measures per
feature column. It measures, and `judge` decides on the `{evidence}` it builds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.rules._helpers.tables import TablesExample, rows, tables

# TODO: why this value holds in general (never because of one example).
MIN_ROWS = 20


def _example() -> TablesExample:
    """TODO: the smallest table that shows it."""
    train = rows(100, seed=0)
    train["x1"] = [None] * 100
    return tables(train=train)


SPEC = FindingSpec(
    code="{code}",
    slug="{slug}",
    severity=Severity.WARNING,
    title="TODO a short title",
    what="TODO: what is wrong with the data, and what trainmedic measures.",
    why="TODO: what it costs the model, and why it is not caught otherwise.",
    example="TODO: the smallest table that shows it.",
    fix="TODO: the fix, in the data's own terms.",
    decided_in=("data check",),
    measured="TODO: how check_tables measures it (its row in the catalogue's DAT table).",
    reported_when="TODO: the thresholds at which it reports, and at which severity.",
    example_input=_example,
)


@dataclass(frozen=True, slots=True)
class {evidence}:
    """TODO: what the check measured: here, the feature columns with no value at all."""

    split: str
    rows: int
    columns: tuple[str, ...]


def check_tables(data: Any) -> list[Finding]:
    """Measure the training split of a `trainmedic.data` Dataset and judge it."""
    train = data.train
    empty = tuple(c for c in train.features if train.frame[c].notna().sum() == 0)
    return judge({evidence}(train.name, len(train.frame), empty))


def message(evidence: {evidence}) -> str:
    return f"TODO: {{len(evidence.columns)}} columns of {{evidence.split}} ({{list(evidence.columns)}})"


def judge(evidence: {evidence}) -> list[Finding]:
    """One finding for the columns measured, when the split is large enough to tell."""
    if evidence.rows < MIN_ROWS or not evidence.columns:
        return []
    evidence_data = {{"split": evidence.split, "columns": list(evidence.columns)}}
    return [SPEC.finding(message(evidence), evidence=evidence_data)]
'''

RUN_EVENTS_TEST = '''"""{code} `{slug}`: the rule on one failing and one healthy observation."""

from __future__ import annotations

from trainmedic.record import RunRecord
from trainmedic.registry import run_rules
from trainmedic.rules.{group} import {module} as finding
from trainmedic.rules._helpers.guard import observed


def test_it_fires_on_the_failure() -> None:
    assert finding.judge(count=8, total=10)
    found = run_rules(RunRecord.of(observed(finding.OBSERVATION, count=8, total=10)))
    assert [f.code for f in found] == ["{code}"]


def test_a_healthy_run_stays_quiet() -> None:
    assert not finding.judge(count=1, total=10)
    assert run_rules(RunRecord.of(observed("torch_guard", every=10))) == []
'''

DATA_CHECK_TEST = '''"""{code} `{slug}`: `check data` on one failing and one healthy table."""

from __future__ import annotations

import pandas as pd

from trainmedic.data import check
from trainmedic.rules._helpers.tables import rows


def test_it_fires_on_the_failure() -> None:
    train = pd.DataFrame(rows(100, seed=0)).assign(x1=None)
    assert "{code}" in [f.code for f in check(train, label="y", label_noise=False)]


def test_a_healthy_table_stays_quiet() -> None:
    train = pd.DataFrame(rows(100, seed=0))
    assert "{code}" not in [f.code for f in check(train, label="y", label_noise=False)]
'''

CASE = """
# TODO ({code}): reproduce the failure for real (a real run, or a real table), then set gate = true.
[[case]]
id = "{case_id}"
category = "{group_upper}"
reproduces = "TODO: what really happens"
kind = "cli"
args = ["TODO-reproduce-{code}"]
must = ["{code}"]
source = "TODO: where this failure is documented (framework docs, a public issue)"
gate = false
gate_reason = "a stub of make new-finding: tests/rules/{group}/test_{module}.py covers it until it is real"
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        raise BadInput(f"{path} already exists")
    path.write_text(text)
    return path


def scaffold(root: Path, code: str, slug: str, place: str) -> list[Path]:
    """Write the finding's file, its test and its benchmark stub; regenerate the catalogue page."""
    validate(root, code, slug, place)
    group = code[:3].lower()
    module = f"{code.lower()}_{slug.replace('-', '_')}"
    values = {
        "code": code,
        "slug": slug,
        "snake": slug.replace("-", "_"),
        "group": group,
        "group_upper": code[:3],
        "module": module,
        "evidence": "".join(part.title() for part in slug.split("-")),
        "case_id": f"{group}-{slug}",
    }
    data = place == "data check"
    finding = write(
        root / "src" / "trainmedic" / "rules" / group / f"{module}.py",
        (DATA_CHECK if data else RUN_EVENTS).format(**values),
    )
    tests = root / "tests" / "rules" / group
    for package in (tests.parent, tests):
        if not (package / "__init__.py").exists():
            write(package / "__init__.py", "")
    test = write(tests / f"test_{module}.py", (DATA_CHECK_TEST if data else RUN_EVENTS_TEST).format(**values))
    cases = root / "benchmarks" / "failures" / "cases.toml"
    cases.write_text(cases.read_text().rstrip("\n") + "\n" + CASE.format(**values))
    catalogue = root / "docs" / "FINDINGS.md"
    subprocess.run(
        [sys.executable, "-m", "trainmedic.report.catalogue", str(catalogue)],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root / "src")},
        check=True,
    )
    return [finding, test, cases, catalogue]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the four files of a new finding.")
    parser.add_argument("code", help="e.g. DAT021: the next code of its group")
    parser.add_argument("slug", help="e.g. constant-feature: kebab-case, never reused")
    parser.add_argument("--place", default="run events", help=f"the template: {' | '.join(TEMPLATES)}")
    parser.add_argument("--root", type=Path, default=REPO, help="the repository to write into")
    args = parser.parse_args(argv)
    try:
        written = scaffold(args.root, args.code, args.slug, args.place)
    except BadInput as exc:
        sys.stderr.write(f"new-finding: {exc}\n")
        return 2
    for path in written:
        sys.stdout.write(f"{path.relative_to(args.root)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
