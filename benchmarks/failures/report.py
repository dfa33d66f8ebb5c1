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


def _ours(outcome: Outcome) -> str:
    text = MARK[outcome.status]
    if outcome.missed:
        text += " " + ", ".join(outcome.missed)
    if outcome.false_positives:
        text += (" + " if outcome.status == "detected" else " ") + "FP " + ", ".join(outcome.false_positives)
    return text


def summary(outcomes: Sequence[Outcome]) -> dict[str, dict[str, int]]:
    """Per category: failure cases detected / missed, controls clean, cases with a false positive."""
    table: dict[str, dict[str, int]] = {}
    for category in (*CATEGORIES, "all"):
        chosen = [o for o in outcomes if category in ("all", o.case.category)]
        if not chosen:
            continue
        table[category] = {
            "cases": sum(not o.case.control for o in chosen),
            "detected": sum(o.status == "detected" for o in chosen),
            "missed": sum(o.status == "missed" for o in chosen),
            "controls": sum(o.case.control for o in chosen),
            "controls_clean": sum(o.status == "clean" for o in chosen),
            "false_positives": sum(bool(o.false_positives) for o in chosen),
            "errors": sum(o.status == "error" for o in chosen),
        }
    return table


def peer_summary(
    outcomes: Sequence[Outcome], peers: Mapping[str, Mapping[str, dict[str, object]]]
) -> dict[str, dict[str, int]]:
    """Per peer: failure cases it could read, how many it detected, controls it flagged."""
    result = {}
    for name, verdicts in peers.items():
        failures = [o for o in outcomes if not o.case.control]
        read = [
            o for o in failures if verdicts.get(o.case.id, {}).get("verdict") not in (None, "n/a", "not run")
        ]
        controls = [
            o
            for o in outcomes
            if o.case.control and verdicts.get(o.case.id, {}).get("verdict") not in (None, "n/a", "not run")
        ]
        result[name] = {
            "cases": len(failures),
            "readable": len(read),
            "detected": sum(verdicts[o.case.id]["verdict"] == "detected" for o in read),
            "controls_read": len(controls),
            "controls_flagged": sum(verdicts[o.case.id]["verdict"] == "false-positive" for o in controls),
        }
    return result


PEER_MARK = {
    "not run": "not run",
    "detected": "✅",
    "missed": "❌",
    "n/a": "n/a",
    "clean": "✅ clean",
    "false-positive": "⚠️ flagged",
    "error": "💥",
}


def markdown(
    outcomes: Sequence[Outcome], peers: Mapping[str, Mapping[str, dict[str, object]]] | None = None
) -> str:
    peers = peers or {}
    names = list(peers)
    lines = [
        "| category | cases | trainmedic detected | controls clean | false positives |",
        "|---|---|---|---|---|",
    ]
    for category, row in summary(outcomes).items():
        lines.append(
            f"| {category} | {row['cases']} | {row['detected']}/{row['cases']} | "
            f"{row['controls_clean']}/{row['controls']} | {row['false_positives']} |"
        )
    if names:
        lines += [
            "",
            "| tool | failure cases it can read | detected (of all failure cases) "
            "| controls read | controls flagged |",
            "|---|---|---|---|---|",
        ]
        ours = summary(outcomes)["all"]
        lines.append(
            f"| trainmedic | {ours['cases']}/{ours['cases']} | {ours['detected']}/{ours['cases']} "
            f"| {ours['controls']} | {ours['controls'] - ours['controls_clean']} |"
        )
        for name, row in peer_summary(outcomes, peers).items():
            lines.append(
                f"| {name} | {row['readable']}/{row['cases']} | {row['detected']}/{row['cases']} "
                f"| {row['controls_read']} | {row['controls_flagged']} |"
            )
        lines += [
            "",
            "| category | trainmedic |" + "".join(f" {n} |" for n in names),
            "|---|---|" + "---|" * len(names),
        ]
        for category, row in summary(outcomes).items():
            chosen = [o for o in outcomes if not o.case.control and category in ("all", o.case.category)]
            cells = [f"{row['detected']}/{row['cases']}"]
            for name in names:
                read = [
                    o
                    for o in chosen
                    if peers[name].get(o.case.id, {}).get("verdict") not in (None, "n/a", "not run")
                ]
                hits = sum(peers[name][o.case.id]["verdict"] == "detected" for o in read)
                cells.append(
                    f"{hits}/{len(chosen)} ({len(chosen) - len(read)} n/a or not run)" if read else "n/a"
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
            verdict = peers[name].get(case.id, {"verdict": "n/a"})
            row += f" {PEER_MARK.get(str(verdict['verdict']), str(verdict['verdict']))} |"
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
