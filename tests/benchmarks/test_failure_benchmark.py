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
from benchmarks.failures import peers, report
from benchmarks.failures.manifest import Case, load
from benchmarks.failures.runner import REPO, Outcome, run_cases

from trainmedic import registry

GROUPS = ("RUN", "KER", "TOR", "TRN", "DAT")
MANIFEST = load()


# Codes that report on trainmedic itself, not on a training failure: no case reproduces them.
NOT_A_TRAINING_FAILURE = {"RUN011": "a guard check that failed inside trainmedic (guard-check-failed)"}


def test_every_landed_code_of_the_five_groups_has_a_case() -> None:
    landed = {spec.code for spec in registry.all_specs() if spec.code[:3] in GROUPS}
    covered = {code for case in MANIFEST.cases for code in case.must}
    assert sorted(landed - covered - set(NOT_A_TRAINING_FAILURE)) == []
    assert set(NOT_A_TRAINING_FAILURE) <= landed
    assert sum(not case.control for case in MANIFEST.cases if case.category in GROUPS) >= 30


def test_controls_cover_every_framework_and_clean_data() -> None:
    controls = [" ".join(case.command + case.args) for case in MANIFEST.cases if case.control]
    for needle in ("examples/keras/", "examples/torch/", "examples/lightning/", "examples/hf/", "/clean/"):
        assert any(needle in command for command in controls), needle
    assert sum("/real_" in command for command in controls) >= 3  # scikit-learn's bundled tables


def test_no_case_reads_a_curve_made_from_a_formula() -> None:
    """Log cases read the logs of real trainings: make_logs.py trains; it writes no loss by formula."""
    make_logs = (REPO / "tests" / "diagnose" / "make_logs.py").read_text()
    assert "math.exp" not in make_logs
    assert "np.exp" not in make_logs
    for case in MANIFEST.cases:
        assert "write_tb.py" not in " ".join(case.command + case.args), case.id


def _case(case_id: str) -> Case:
    return next(case for case in MANIFEST.cases if case.id == case_id)


def test_peers_are_scored_per_required_finding() -> None:
    """A peer without an equivalent of a finding gets n/a for it, not a miss; a hit on one of two
    applicable findings is partial."""
    oom = Outcome(_case("run-oom-at-epoch-end-eval"), "detected")  # RUN001 + RUN003
    seen_as_sigkill = peers._verdict(oom, "guarftrain", ["RUN008"], True, None)
    assert seen_as_sigkill["codes"] == {"RUN001": "n/a", "RUN003": "n/a"}
    assert seen_as_sigkill["verdict"] == "n/a"
    leaky = Outcome(_case("dat-sklearn-leaky-in-process"), "detected")  # DAT014, DAT001, DAT009
    verdict = peers._verdict(leaky, "deepchecks", ["DAT001"], True, None)
    assert verdict["codes"] == {"DAT014": "n/a", "DAT001": "hit", "DAT009": "n/a"}
    assert verdict["verdict"] == "detected"
    bash = Outcome(_case("run-silent-early-exit-behind-bash"), "detected")  # RUN004, RUN006
    assert peers._verdict(bash, "guarftrain", [], False, None)["verdict"] == "n/a"
    crash = Outcome(_case("run-crash-shape-bug"), "detected")  # RUN009
    missed = peers._verdict(crash, "guarftrain", [], False, None)
    table = report.markdown([oom, leaky, crash], {"guarftrain 0.3.0": {"run-crash-shape-bug": missed}})
    assert "| guarftrain 0.3.0 | 6 | 1 | 0/1 |" in table


def test_guarftrain_oom_is_the_framework_allocator_error() -> None:
    """guarftrain's `oom` kind matches allocator errors in stderr (guardian/watchdog.py), not the
    kernel's OOM kill, which it reports as `sigkill`."""
    assert peers.GUARFTRAIN["oom"] == "RUN002"
    assert "RUN001" not in peers.CAN_FIND["guarftrain"]


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
@pytest.mark.heavy
@pytest.mark.timeout(2400)  # ~55 real runs, 2 at a time, on a shared 2-core machine
def test_gate_every_must_finding_and_quiet_controls(tmp_path: Path) -> None:
    gate = [case for case in MANIFEST.cases if case.gate]
    assert _problems(gate, tmp_path) == []
