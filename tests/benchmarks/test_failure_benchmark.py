"""The CI gate of the failure benchmark (benchmarks/failures): trainmedic's side, not the peers'.

The manifest tests are instant. The gate runs, for real and 2 at a time, every case that no
other test already asserts identically (those carry `gate = false` and the name of that
test), and fails on a missed must-finding, a false positive, a control with a warning or
an error, or a case that did not run.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from benchmarks.failures.manifest import Case, load
from benchmarks.failures.runner import REPO, run_cases

from trainmedic import registry

GROUPS = ("RUN", "KER", "TOR", "TRN", "DAT")
MANIFEST = load()


def test_every_landed_code_of_the_five_groups_has_a_case() -> None:
    landed = {spec.code for spec in registry.all_specs() if spec.code[:3] in GROUPS}
    covered = {code for case in MANIFEST.cases for code in case.must}
    assert sorted(landed - covered) == []
    assert sum(not case.control for case in MANIFEST.cases if case.category in GROUPS) >= 30


def test_controls_cover_every_framework_and_clean_data() -> None:
    controls = [" ".join(case.command + case.args) for case in MANIFEST.cases if case.control]
    for needle in ("examples/keras/", "examples/torch/", "examples/lightning/", "examples/hf/", "/clean/"):
        assert any(needle in command for command in controls), needle


def test_every_case_names_its_source_and_its_scripts_exist() -> None:
    for case in MANIFEST.cases:
        assert case.source, case.id
        assert case.gate or case.gate_reason, (
            f"{case.id}: a case left out of the gate says which test covers it"
        )
        words = [w for part in case.command for w in shlex.split(part)]
        for word in words:
            if word.endswith(".py") and not word.startswith("{"):
                assert (REPO / word).exists(), f"{case.id}: {word}"


def _problems(cases: list[Case], out: Path) -> list[str]:
    outcomes = run_cases(cases, MANIFEST.prepares, out, workers=2, progress=False)
    problems = []
    for outcome in outcomes:
        if outcome.status not in ("detected", "clean") or outcome.false_positives:
            found = [f"{f['code']}:{f['severity']}" for f in outcome.found]
            problems.append(
                f"{outcome.case.id}: {outcome.status}, missed {outcome.missed}, false positives "
                f"{outcome.false_positives}, found {found} {outcome.detail} (see {outcome.work})"
            )
    return problems


@pytest.mark.slow
@pytest.mark.timeout(2400)  # ~55 real runs, 2 at a time, on a shared 2-core machine
def test_gate_every_must_finding_and_quiet_controls(tmp_path: Path) -> None:
    gate = [case for case in MANIFEST.cases if case.gate]
    assert _problems(gate, tmp_path) == []
