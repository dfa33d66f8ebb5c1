"""`python -m benchmarks.failures`: run the failure benchmark, write the table and the JSON.

    python -m benchmarks.failures                   # every case, trainmedic only
    python -m benchmarks.failures --peers           # beside runmedic, trainproof, guarftrain, deepchecks
    python -m benchmarks.failures --gate            # the CI subset (cases no other test asserts)
    python -m benchmarks.failures --case tor- --category DAT --docs

Outputs go to benchmarks/failures/out/ (gitignored): results.json, table.md and one folder
per case (the command, its output, the run folder). `--docs` also writes docs/failure-benchmark.md's table.
Exit status 1 when a must-finding is missed, a control raises a warning or error, or a case errors.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import report
from .manifest import load
from .runner import REPO, run_cases

OUT = Path(__file__).resolve().parent / "out"
DOCS = REPO / "docs" / "failure-benchmark.md"
README = REPO / "README.md"
TABLE_START, TABLE_END = "<!-- table:start -->", "<!-- table:end -->"
README_START, README_END = "<!-- failure-benchmark:start -->", "<!-- failure-benchmark:end -->"


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.failures", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--case", action="append", default=[], help="run cases whose id contains this (repeatable)"
    )
    parser.add_argument(
        "--category", action="append", default=[], help="RUN, KER, TOR, TRN, DAT, CFG (repeatable)"
    )
    parser.add_argument("--gate", action="store_true", help="only the cases the CI gate runs")
    parser.add_argument(
        "--peers", action="store_true", help="also run the peers (installs them on first use)"
    )
    parser.add_argument(
        "--reuse", action="store_true", help="keep results (ours, the peers') already in --out"
    )
    parser.add_argument(
        "--peers-cached-only",
        action="append",
        default=[],
        metavar="PEER",
        help="do not run this peer again: cases it has no verdict for yet are 'not run' (e.g. guarftrain)",
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--docs", action="store_true", help=f"write the table into {DOCS.relative_to(REPO)}")
    return parser.parse_args()


def replace_between(path: Path, start: str, end: str, text: str) -> None:
    head, _, rest = path.read_text().partition(start)
    _, _, tail = rest.partition(end)
    path.write_text(f"{head}{start}\n{text}{end}{tail}")


def main() -> int:
    args = parse()
    manifest = load()
    cases = [
        case
        for case in manifest.cases
        if (not args.case or any(part in case.id for part in args.case))
        and (not args.category or case.category in args.category)
        and (case.gate or not args.gate)
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    print(
        f"failure benchmark: {len(cases)} cases, {args.workers} workers, output in {args.out}",
        file=sys.stderr,
    )
    outcomes = run_cases(cases, manifest.prepares, args.out, args.workers, reuse=args.reuse)
    peers = {}
    if args.peers:
        from .peers import run_peers

        peers = run_peers(
            outcomes, args.out, args.workers, reuse=args.reuse, cached_only=args.peers_cached_only
        )
    summary = report.markdown(outcomes, peers)
    table = f"{summary}\n{report.cases_markdown(outcomes, peers)}"
    (args.out / "table.md").write_text(table)
    document = report.document(outcomes, peers)
    document["seconds"] = round(time.monotonic() - start, 1)
    (args.out / "results.json").write_text(json.dumps(document, indent=2))
    if args.docs:
        replace_between(DOCS, TABLE_START, TABLE_END, table)
        replace_between(README, README_START, README_END, summary)
    print(table)
    print(f"{document['seconds']} s; results in {args.out / 'results.json'}", file=sys.stderr)
    bad = [o for o in outcomes if o.status in ("missed", "false-positive", "error") or o.false_positives]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
