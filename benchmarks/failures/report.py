"""The benchmark's Markdown table and JSON document."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .manifest import CATEGORIES
from .runner import Outcome

MARK = {
    "detected": "✅",
    "clean": "✅ clean",
    "missed": "❌ missed",
    "false-positive": "⚠️ false positive",
    "error": "💥 error",
}


def info_only(outcome: Outcome) -> bool:
    """A failure case trainmedic detected only through info-level findings (no warning, no error
    among its must-findings): found, but easy to overlook; the tables mark it."""
    if outcome.case.control or outcome.status != "detected":
        return False
    levels = {str(f["code"]): str(f.get("severity")) for f in outcome.found if f.get("severity") != "info"}
    return not any(code in levels for code in outcome.case.must)


def _ours(outcome: Outcome) -> str:
    text = MARK[outcome.status]
    if info_only(outcome):
        text += " (info only)"
    if outcome.missed:
        text += " " + ", ".join(outcome.missed)
    if outcome.false_positives:
        text += (" + " if outcome.status == "detected" else " ") + "FP " + ", ".join(outcome.false_positives)
    return text


def summary(outcomes: Sequence[Outcome]) -> dict[str, dict[str, int]]:
    """Per category: failure cases detected / missed, required findings found, controls clean,
    cases with a false positive."""
    table: dict[str, dict[str, int]] = {}
    for category in (*CATEGORIES, "all"):
        chosen = [o for o in outcomes if category in ("all", o.case.category)]
        if not chosen:
            continue
        failures = [o for o in chosen if not o.case.control]
        table[category] = {
            "cases": len(failures),
            "detected": sum(o.status == "detected" for o in chosen),
            "info_only": sum(info_only(o) for o in chosen),
            "missed": sum(o.status == "missed" for o in chosen),
            "codes": sum(len(o.case.must) for o in failures),
            "codes_found": sum(len(o.case.must) - len(o.missed) for o in failures if o.status != "error"),
            "controls": sum(o.case.control for o in chosen),
            "controls_clean": sum(o.status == "clean" for o in chosen),
            "false_positives": sum(bool(o.false_positives) for o in chosen),
            "errors": sum(o.status == "error" for o in chosen),
        }
    return table


UNREAD = (None, "n/a", "not run")


def _code_counts(outcomes: Sequence[Outcome], verdicts: Mapping[str, dict[str, object]]) -> dict[str, int]:
    """A peer's required findings over failure cases: hits, applicable (hit or miss), and n/a
    (it has no equivalent, or could not read the case's input)."""
    counts = {"codes": 0, "applicable": 0, "hits": 0}
    for o in outcomes:
        if o.case.control:
            continue
        counts["codes"] += len(o.case.must)
        per_code = verdicts.get(o.case.id, {}).get("codes")
        if not isinstance(per_code, dict):
            continue
        counts["applicable"] += sum(v != "n/a" for v in per_code.values())
        counts["hits"] += sum(v == "hit" for v in per_code.values())
    return counts


def peer_summary(
    outcomes: Sequence[Outcome], peers: Mapping[str, Mapping[str, dict[str, object]]]
) -> dict[str, dict[str, int]]:
    """Per peer: required findings it could look for and how many it found; controls it flagged."""
    result = {}
    for name, verdicts in peers.items():
        controls = [
            o for o in outcomes if o.case.control and verdicts.get(o.case.id, {}).get("verdict") not in UNREAD
        ]
        failures = [o for o in outcomes if not o.case.control]
        result[name] = {
            **_code_counts(outcomes, verdicts),
            "cases": len(failures),
            "cases_not_run": sum(verdicts.get(o.case.id, {}).get("verdict") == "not run" for o in failures),
            "controls_read": len(controls),
            "controls_flagged": sum(verdicts[o.case.id]["verdict"] == "false-positive" for o in controls),
        }
    return result


PEER_MARK = {
    "not run": "not run",
    "n/a": "n/a",
    "clean": "✅ clean",
    "false-positive": "⚠️ flagged",
    "error": "💥",
}
CODE_MARK = {"hit": "✅", "miss": "❌", "n/a": "n/a"}


def _peer_cell(verdict: Mapping[str, object]) -> str:
    """A control's verdict, or one mark per required finding (in the order of "must find")."""
    per_code = verdict.get("codes")
    if isinstance(per_code, dict) and verdict.get("verdict") != "n/a":
        return " ".join(CODE_MARK[str(v)] for v in per_code.values())
    return PEER_MARK.get(str(verdict["verdict"]), str(verdict["verdict"]))


def markdown(
    outcomes: Sequence[Outcome], peers: Mapping[str, Mapping[str, dict[str, object]]] | None = None
) -> str:
    peers = peers or {}
    names = list(peers)
    lines = [
        "| category | cases | trainmedic detected | of which info only | controls clean | false positives |",
        "|---|---|---|---|---|---|",
    ]
    for category, row in summary(outcomes).items():
        lines.append(
            f"| {category} | {row['cases']} | {row['detected']}/{row['cases']} | {row['info_only']} | "
            f"{row['controls_clean']}/{row['controls']} | {row['false_positives']} |"
        )
    if names:
        ours = summary(outcomes)["all"]
        lines += [
            "",
            "Required findings, scored one by one: found / applicable (n/a: the tool has no equivalent"
            " of the finding, or cannot read the case's input).",
            "",
            "| tool | required findings | applicable | found (of applicable) | controls read "
            "| controls flagged |",
            "|---|---|---|---|---|---|",
            f"| trainmedic | {ours['codes']} | {ours['codes']} | {ours['codes_found']}/{ours['codes']} "
            f"| {ours['controls']} | {ours['controls'] - ours['controls_clean']} |",
        ]
        for name, row in peer_summary(outcomes, peers).items():
            not_run = f" ({row['cases_not_run']} cases not run)" if row["cases_not_run"] else ""
            lines.append(
                f"| {name} | {row['codes']} | {row['applicable']}{not_run} "
                f"| {row['hits']}/{row['applicable']} | {row['controls_read']} | {row['controls_flagged']} |"
            )
        lines += [
            "",
            "| category | trainmedic |" + "".join(f" {n} |" for n in names),
            "|---|---|" + "---|" * len(names),
        ]
        for category, row in summary(outcomes).items():
            chosen = [o for o in outcomes if category in ("all", o.case.category)]
            cells = [f"{row['codes_found']}/{row['codes']}"]
            for name in names:
                counts = _code_counts(chosen, peers[name])
                na = counts["codes"] - counts["applicable"]
                cells.append(
                    f"{counts['hits']}/{counts['applicable']} ({na} n/a)" if counts["applicable"] else "n/a"
                )
            lines.append(f"| {category} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def cases_markdown(
    outcomes: Sequence[Outcome], peers: Mapping[str, Mapping[str, dict[str, object]]] | None = None
) -> str:
    """One row per case: what must be found, trainmedic's verdict, each peer's."""
    peers = peers or {}
    names = list(peers)
    lines = []
    header = "| case | category | must find | trainmedic |" + "".join(f" {n} |" for n in names)
    lines += [header, "|---|---|---|---|" + "---|" * len(names)]
    for outcome in outcomes:
        case = outcome.case
        must = "control" if case.control else ", ".join(case.must)
        row = f"| `{case.id}` | {case.category} | {must} | {_ours(outcome)} |"
        for name in names:
            row += f" {_peer_cell(peers[name].get(case.id, {'verdict': 'n/a'}))} |"
        lines.append(row)
    return "\n".join(lines) + "\n"


def document(
    outcomes: Sequence[Outcome], peers: Mapping[str, Mapping[str, dict[str, object]]] | None = None
) -> dict[str, object]:
    return {
        "summary": summary(outcomes),
        "cases": [o.to_json() for o in outcomes],
        "peers": {name: dict(verdicts) for name, verdicts in (peers or {}).items()},
        "peer_summary": peer_summary(outcomes, peers or {}),
    }
