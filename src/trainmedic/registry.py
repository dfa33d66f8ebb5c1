"""The one registry of finding codes and rules, collected from `trainmedic.rules`.

Every code of FINDINGS.md is here exactly once, with its documentation, even
before a rule produces it: `trainmedic rules` and `explain` read this.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from types import ModuleType

from trainmedic.errors import UsageError
from trainmedic.findings import PLACES, Finding, FindingSpec, Place, Severity, sort_findings
from trainmedic.record import Rule, RunRecord

# Catalogue order of the groups (FINDINGS.md); codes ascend within a group.
GROUP_ORDER = ("RUN", "TRN", "KER", "TOR", "DAT", "CFG", "ENV")


#: A finding's file: `rules/<group>/<code>_<slug>.py`, e.g. `rules/tor/tor012_adapters_not_learning.py`.
_FILE = re.compile(r"^(?P<code>[a-z]{3}[0-9]{3})_(?P<slug>[a-z0-9]+(?:_[a-z0-9]+)*)$")


@cache
def _families() -> tuple[ModuleType, ...]:
    """Every finding's file, in catalogue order: discovered, not listed.

    Each group package (`rules/tor/`) holds one file a finding, named `<code>_<slug>.py`; each
    file holds its code's `SPEC` (which says where it is decided) and, for an event rule,
    `RULES`. A file whose name disagrees with its SPEC fails loudly here. The private
    `rules._helpers` is what the findings share, imported by them when needed, never
    collected: a clean run does not compile their patterns.
    """
    from trainmedic import rules

    found: list[ModuleType] = []
    for group in GROUP_ORDER:
        package = f"{rules.__name__}.{group.lower()}"
        folder = Path(rules.__file__).parent / group.lower()
        for info in sorted(pkgutil.iter_modules([str(folder)]), key=lambda m: m.name):
            match = _FILE.match(info.name)
            if match is None:
                continue
            module = importlib.import_module(f"{package}.{info.name}")
            spec = getattr(module, "SPEC", None)
            named = (match["code"].upper(), match["slug"].replace("_", "-"))
            if not isinstance(spec, FindingSpec) or (spec.code, spec.slug) != named:
                raise RuntimeError(f"{module.__name__}: its SPEC must be {named[0]} {named[1]!r}")
            found.append(module)
    return tuple(found)


def _catalogue_key(spec: FindingSpec) -> tuple[int, str]:
    group = GROUP_ORDER.index(spec.group) if spec.group in GROUP_ORDER else len(GROUP_ORDER)
    return group, spec.code


@cache
def all_specs() -> tuple[FindingSpec, ...]:
    """Every catalogue entry, in FINDINGS.md order; fails loudly on a duplicate code or slug."""
    specs = tuple(
        sorted(
            (family.SPEC for family in _families()),
            key=_catalogue_key,
        )
    )
    for attr in ("code", "slug"):
        seen: set[str] = set()
        for spec in specs:
            key = getattr(spec, attr)
            if key in seen:
                raise RuntimeError(f"duplicate finding {attr} {key!r} in the registry")
            seen.add(key)
    return specs


def home_of(spec: FindingSpec) -> str:
    """The dotted name of the module that defines `spec`: where a reader goes from the catalogue."""
    for family in _families():
        if spec == family.SPEC:
            return family.__name__
    raise LookupError(f"{spec.code} is not in the registry")


def lookup(code_or_slug: str) -> FindingSpec:
    """Find a spec by code (case-insensitive) or slug; a usage error names the valid forms."""
    wanted = code_or_slug.strip()
    for spec in all_specs():
        if wanted.upper() == spec.code or wanted.lower() == spec.slug:
            return spec
    raise UsageError(
        f"unknown finding {code_or_slug!r}: expected a code like RUN001 or a slug like "
        "oom-killed (see `trainmedic rules`)"
    )


@cache
def _explained_by() -> dict[str, frozenset[str]]:
    """code -> the codes whose finding explains it (a finding's file may name them in
    `EXPLAINED_BY`): where one of them is found as an error, this one is its consequence,
    not a cause."""
    return {family.SPEC.code: frozenset(getattr(family, "EXPLAINED_BY", ())) for family in _families()}


def all_rules() -> tuple[Rule, ...]:
    """Every event rule (families without event rules, such as DAT, contribute none)."""
    return tuple(r for family in _families() for r in getattr(family, "RULES", ()))


@cache
def modules_for(place: Place) -> tuple[ModuleType, ...]:
    """The files of the findings decided at `place`, in catalogue order."""
    if place not in PLACES:
        raise ValueError(f"unknown place {place!r}: expected one of {PLACES}")
    return tuple(f for f in _families() if place in f.SPEC.decided_in)


def specs_for(place: Place) -> tuple[FindingSpec, ...]:
    """The findings decided at `place` (see `findings.Place`), in catalogue order."""
    return tuple(f.SPEC for f in modules_for(place))


@cache
def rules_for(place: Place) -> tuple[Rule, ...]:
    """The event rules `place` applies, in catalogue order: each declaring file's `RULES`, or
    its `RULES_AT[place]` where only some of them read what that place observes."""
    return tuple(
        rule
        for f in modules_for(place)
        for rule in getattr(f, "RULES_AT", {}).get(place, getattr(f, "RULES", ()))
    )


def run_rules(record: RunRecord, rules: Iterable[Rule] | None = None) -> list[Finding]:
    """Apply rules to a record, add the findings guards raised in-process, dedupe, sort.

    A guard that raised a finding in-process saw it live, at the step, with the batch at
    hand; a rule that later finds the same code for the same rank in the event stream
    (e.g. TRN001 from the logged losses) says the same thing with less: it is dropped. So is
    a finding whose file names, in `EXPLAINED_BY`, a code that was found: one cause, one finding.
    """
    raised = record.raised_findings
    seen_live = {(f.code, f.rank) for f in raised}
    live_codes = {f.code for f in raised}

    def said_live(f: Finding) -> bool:  # a rule finding without a rank covers every rank
        return (f.code, f.rank) in seen_live or (f.rank is None and f.code in live_codes)

    found: list[Finding] = list(raised)
    for rule in rules if rules is not None else rules_for("run events"):
        found.extend(f for f in rule(record) if not said_live(f))
    # A framework's own rule (its evidence names the framework: a booster's rounds, a Keras
    # history) says what a generic curve rule says of the same process, with its terms and fix.
    # A generic finding without a PID is of the whole run.
    specific = {(f.code, f.pid) for f in found if "framework" in f.evidence}
    specific_codes = {code for code, _ in specific}

    def restated(f: Finding) -> bool:
        return "framework" not in f.evidence and (
            (f.code, f.pid) in specific or (f.pid is None and f.code in specific_codes)
        )

    present = {f.code for f in found if f.severity is Severity.ERROR}
    explained_by = _explained_by()
    unique: dict[tuple[object, ...], Finding] = {}
    for f in found:
        if restated(f) or explained_by.get(f.code, frozenset()) & present:
            continue
        unique.setdefault((f.code, f.message, f.rank, f.pid), f)
    return sort_findings(unique.values())
