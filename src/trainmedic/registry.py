"""The one registry of finding codes and rules, collected from `trainmedic.rules`.

Every code of FINDINGS.md is here exactly once, with its documentation, even
before a rule produces it: `trainmedic rules` and `explain` read this.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

from trainmedic.errors import UsageError
from trainmedic.findings import Finding, FindingSpec, sort_findings
from trainmedic.record import Rule, RunRecord
from trainmedic.rules import config, data, dynamics, env, keras, run, torch

_FAMILIES = (run, dynamics, keras, torch, data, config, env)


@cache
def all_specs() -> tuple[FindingSpec, ...]:
    """Every catalogue entry, in FINDINGS.md order; fails loudly on a duplicate code or slug."""
    specs = tuple(spec for family in _FAMILIES for spec in family.SPECS)
    for attr in ("code", "slug"):
        seen: set[str] = set()
        for spec in specs:
            key = getattr(spec, attr)
            if key in seen:
                raise RuntimeError(f"duplicate finding {attr} {key!r} in the registry")
            seen.add(key)
    return specs


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


def all_rules() -> tuple[Rule, ...]:
    """Every event rule (families without event rules, such as DAT, contribute none)."""
    return tuple(r for family in _FAMILIES for r in getattr(family, "RULES", ()))


def run_rules(record: RunRecord, rules: Iterable[Rule] | None = None) -> list[Finding]:
    """Apply rules to a record, add the findings guards raised in-process, dedupe, sort."""
    found: list[Finding] = list(record.raised_findings)
    for rule in rules if rules is not None else all_rules():
        found.extend(rule(record))
    unique: dict[tuple[object, ...], Finding] = {}
    for f in found:
        unique.setdefault((f.code, f.message, f.rank, f.pid), f)
    return sort_findings(unique.values())
