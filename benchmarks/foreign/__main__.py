"""python -m benchmarks.foreign [--fast] [SCRIPT ...]: run the corpus and print its table.

Exit status 1 when a run missed its bug, warned on a healthy script, recorded no
step, or failed.
"""

from __future__ import annotations

import argparse
import sys

from .corpus import load, run_all, table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.foreign")
    parser.add_argument("scripts", nargs="*", help="only these scripts (manifest names)")
    parser.add_argument("--fast", action="store_true", help="only the CI subset")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--markdown", action="store_true", help="print the table in Markdown")
    args = parser.parse_args(argv)
    runs = [r for r in load() if (not args.fast or r.fast) and (not args.scripts or r.script in args.scripts)]
    results = run_all(runs, args.workers)
    print(table(results, markdown=args.markdown))
    for failed in (r for r in results if not r.ok):
        print(f"\n--- {failed.run.name}: exit {failed.exit_code}, stderr tail ---\n{failed.stderr[-1500:]}")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
