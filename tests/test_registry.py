"""Every finding in the registry, checked the same way (like sklearn's test_common)."""

from __future__ import annotations

import dataclasses
import importlib
import json
import re
from pathlib import Path
from types import ModuleType

import pytest

from trainmedic.findings import DOC_SECTIONS, PLACES, Finding, FindingSpec, Severity
from trainmedic.registry import all_specs, home_of, lookup, rules_for, specs_for

from .conftest import REPO, SHARED_FINDINGS, VENDORED_FINDINGS

ROW = re.compile(r"^\| ([A-Z]{3}[0-9]{3}) \| `([a-z0-9-]+)` \|", re.MULTILINE)


def catalogue() -> list[tuple[str, str]]:
    """(code, slug) of every row of the repository's catalogue, `docs/FINDINGS.md`, in order."""
    return ROW.findall(VENDORED_FINDINGS.read_text())


def test_registry_matches_the_repository_catalogue_exactly() -> None:
    assert [(s.code, s.slug) for s in all_specs()] == catalogue()


def test_the_catalogue_page_is_generated_from_the_findings_files() -> None:
    from trainmedic.report.catalogue import catalogue_markdown

    assert VENDORED_FINDINGS.read_text() == catalogue_markdown(), "stale: run `make findings-doc`"


def test_every_data_check_says_how_it_measures_and_when_it_reports_on_the_catalogue_page() -> None:
    """docs/data.md keeps no table of its own: it links to the one generated from these fields."""
    from trainmedic.report.catalogue import CHECKED_HEADING

    checks = [s for s in all_specs() if "data check" in s.decided_in]
    assert checks
    assert [s.code for s in checks if not (s.measured and s.reported_when)] == []
    page = VENDORED_FINDINGS.read_text()
    assert CHECKED_HEADING.format(group="DAT") + "\n" in page
    assert all(f"| {s.code} `{s.slug}` | " in page for s in checks)
    assert "(FINDINGS.md#dat-what-is-checked-and-how)" in (REPO / "docs" / "data.md").read_text()


def test_catalogue_keeps_every_shared_code_and_adds_only_at_the_end_of_a_group() -> None:
    """The shared catalogue is the contract: the repository's copy may only grow it.

    An issue that adds a finding adds it to `docs/FINDINGS.md` at the end of its group; the
    shared copy catches up later. The shared copy also lists the codes that open issues plan:
    those may be missing here, but only from the end of their group, so every shared code
    that is here stands in its shared order with its shared slug.
    """
    if not SHARED_FINDINGS.exists():
        pytest.skip("no ../shared/FINDINGS.md beside this checkout")
    ours = catalogue()
    shared = ROW.findall(SHARED_FINDINGS.read_text())
    for group in {code[:3] for code, _ in shared}:
        shared_group = [row for row in shared if row[0][:3] == group]
        ours_from_shared = [row for row in ours if row[0][:3] == group and row[0] in dict(shared)]
        assert ours_from_shared == shared_group[: len(ours_from_shared)], group
    last_shared = {code[:3]: int(code[3:]) for code, _ in shared}
    for code, slug in ours:
        if (code, slug) not in shared:
            assert code[:3] in last_shared, f"{code}: a new group"
            assert int(code[3:]) > last_shared[code[:3]], f"{code} {slug}: not at the end of its group"
            assert code not in {c for c, _ in shared}
            assert slug not in {s for _, s in shared}


@pytest.mark.parametrize("spec", all_specs(), ids=lambda s: s.code)
def test_every_spec_is_documented_and_round_trips(spec: FindingSpec) -> None:
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", spec.slug)
    for section in DOC_SECTIONS:
        assert len(getattr(spec, section).strip()) > 10, f"{spec.code}.{section} too short"
    finding = spec.finding("measured fact", evidence={"peak": 1.5, "loss": float("nan")}, step=3)
    data = json.loads(json.dumps(finding.to_dict(), allow_nan=False))
    back = Finding.from_dict(data)
    assert (back.code, back.slug, back.step, back.severity) == (spec.code, spec.slug, 3, spec.severity)
    assert data["evidence"]["loss"] == "nan"
    assert lookup(spec.code) is spec
    assert lookup(spec.slug) is spec
    assert lookup(spec.code.lower()) is spec


def test_severity_order() -> None:
    assert Severity.ERROR.at_least(Severity.WARNING)
    assert not Severity.INFO.at_least(Severity.WARNING)


def test_spec_rejects_bad_code_and_slug() -> None:
    with pytest.raises(ValueError, match="go together"):
        dataclasses.replace(lookup("DAT001"), reported_when="")
    docs = {"title": "t", "what": "w", "why": "y", "example": "e", "fix": "f"}
    with pytest.raises(ValueError, match="ABC123"):
        FindingSpec(code="R1", slug="ok", severity=Severity.INFO, **docs)
    with pytest.raises(ValueError, match="kebab"):
        FindingSpec(code="RUN999", slug="Not_Kebab", severity=Severity.INFO, **docs)


def test_a_finding_raised_in_process_replaces_the_rules_same_code_for_that_rank() -> None:
    from trainmedic.events import FindingRaised, Step
    from trainmedic.record import RunRecord
    from trainmedic.registry import run_rules
    from trainmedic.rules.trn.trn001_nonfinite_loss import SPEC as NONFINITE_LOSS

    live = NONFINITE_LOSS.finding("Loss became nan at step 3 (batch 17-24)", step=3, rank=0)
    losses = [1.0, 0.9, float("nan")]
    steps = [Step(step=i, metrics={"loss": v}, rank=0, t=float(i)) for i, v in enumerate(losses)]
    from_rules_only = run_rules(RunRecord.of(steps))
    assert [f.code for f in from_rules_only] == ["TRN001"]
    both = run_rules(RunRecord.of([*steps, FindingRaised(finding=live.to_dict(), rank=0, t=3.0)]))
    assert [(f.code, f.message) for f in both] == [("TRN001", live.message)]
    # a rule finding that names another rank than the live one stays
    elsewhere = FindingRaised(finding={**live.to_dict(), "rank": 1}, t=3.0)
    rule_on_rank0 = NONFINITE_LOSS.finding("from the stream", rank=0)
    kept = run_rules(RunRecord.of([*steps, elsewhere]), rules=[lambda _record: [rule_on_rank0]])
    assert sorted(f.rank for f in kept) == [0, 1]


# -- where each finding is decided: declared in its SPEC, every list derived from it -------------
SRC = Path(__file__).resolve().parents[1] / "src" / "trainmedic"
#: The collectors that call a finding's `judge` where they measure, by place.
JUDGED_IN = {
    "fine-tune data": ("data/finetune",),
    "image data": ("data/image_checks.py",),
    "input contract": ("data/_contract.py",),
    "sklearn audit": ("sklearn",),
    "environment check": ("cli/diff_cmd.py",),
}


def _imported_by(module: str, homes: tuple[str, ...]) -> bool:
    from .test_architecture import finding_imports

    files = [
        p for home in homes for p in ([SRC / home] if home.endswith(".py") else (SRC / home).rglob("*.py"))
    ]
    return any(module in finding_imports(path) for path in files)


def _rules_of(module: ModuleType, place: str) -> tuple[object, ...]:
    return tuple(getattr(module, "RULES_AT", {}).get(place, getattr(module, "RULES", ())))


@pytest.mark.parametrize("spec", all_specs(), ids=lambda s: s.code)
def test_every_finding_declares_where_it_is_decided_and_each_place_applies_it(spec: FindingSpec) -> None:
    import trainmedic._boosting as boosting
    import trainmedic.torch._guard as torch_guard
    from trainmedic.data import engines, runner

    module = importlib.import_module(home_of(spec))
    assert spec.decided_in
    assert set(spec.decided_in) <= set(PLACES)
    assert ("run events" in spec.decided_in) == hasattr(module, "RULES"), "its RULES read a run's events"
    applied = {
        "run events": rules_for("run events"),
        "torch guard": torch_guard.RULES,
        "boosters": boosting.RULES,
        "config check": rules_for("config check"),
    }
    for place in spec.decided_in:
        if place in applied:
            assert _rules_of(module, place), f"{spec.code} is declared for the {place} but has no rules"
            assert set(_rules_of(module, place)) <= set(applied[place]), place
        elif place == "data check":
            assert runner.CHECKS[spec.slug] is runner.pandas_check(module)
        elif place == "data engine":
            assert spec.slug in engines.EXACT_CHECKS
            assert spec.slug in runner.CHECKS
        if place in JUDGED_IN:
            rules_applied = place == "environment check" and _rules_of(module, place)
            assert rules_applied or _imported_by(module.__name__, JUDGED_IN[place]), place


def test_each_place_applies_only_what_is_declared_for_it() -> None:
    """The converse: no rule runs at a place its finding does not name."""
    import trainmedic._boosting as boosting
    import trainmedic.torch._guard as torch_guard
    from trainmedic.data import engines, runner

    code_of = {
        rule: spec.code
        for spec in all_specs()
        for module in [importlib.import_module(home_of(spec))]
        for rule in getattr(module, "RULES", ())
    }

    def codes(rules: tuple[object, ...]) -> set[str]:
        return {code_of[rule] for rule in rules}

    assert codes(torch_guard.RULES) == {s.code for s in specs_for("torch guard")}
    assert codes(boosting.RULES) == {"TRN004", "TRN009", "DAT009"}
    assert list(runner.CHECKS) == [s.slug for s in specs_for("data check")]
    assert list(engines.EXACT_CHECKS) == [s.slug for s in specs_for("data engine")]
    # the call sites that ask at call time name the place they are
    for where, place in (
        ("configcheck/__init__.py", "config check"),
        ("cli/env_cmd.py", "environment check"),
    ):
        assert f'rules_for("{place}")' in (SRC / where).read_text()


def test_a_finding_file_is_found_by_its_name_and_must_agree_with_its_spec() -> None:
    for spec in all_specs():
        home = home_of(spec)
        assert home.rsplit(".", 1)[1] == f"{spec.code.lower()}_{spec.slug.replace('-', '_')}"
        assert home.split(".")[2] == spec.group.lower()
    with pytest.raises(ValueError, match="decided_in"):
        FindingSpec(
            code="RUN999",
            slug="ok",
            severity=Severity.INFO,
            title="t",
            what="w",
            why="y",
            example="e",
            fix="f",
        )
    with pytest.raises(ValueError, match="unknown place"):
        specs_for("nowhere")  # type: ignore[arg-type]
