"""The supervisor's fixed cost per run: CPU seconds `trainmedic run` adds to a trivial command.

Each round runs `python -c pass` bare and `trainmedic run --quiet -- python -c pass`
(which of the two goes first alternates, so drift on a shared machine hits both alike),
and reads the CPU of everything each one waited for (`getrusage(RUSAGE_CHILDREN)`: the
supervisor, the git process of its manifest, the child with its instrumentation). The
fixed cost of a round is the supervised CPU less the bare child's; the figure is the
median over the rounds, against a target of at most 0.3 s of CPU per run.

    python benchmarks/supervise_fixed_cost.py --rounds 9

The supervisor runs as the console script does (`cli.main.entry`), in a fresh run folder
each round; the result is the same in any folder, but git's share is that of the folder
it runs in (the manifest records the working tree's state).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

TARGET_S = 0.3
# `trainmedic` as the console script starts it
CONSOLE_SCRIPT = "from trainmedic.cli.main import entry; entry()"


@dataclass(frozen=True, slots=True)
class Round:
    bare_s: float  # CPU of `python -c pass`
    supervised_s: float  # CPU of `trainmedic run -- python -c pass`, every process it waited for

    @property
    def fixed_s(self) -> float:
        return self.supervised_s - self.bare_s


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cpu_of(command: list[str], env: dict[str, str]) -> float:
    """CPU seconds of `command` and every process it waited for."""
    before = _children_cpu()
    subprocess.run(command, env=env, check=True, stdin=subprocess.DEVNULL, capture_output=True)
    return _children_cpu() - before


def measure(rounds: int, work: Path) -> list[Round]:
    """`rounds` interleaved pairs of a bare and a supervised `python -c pass`."""
    env = {**os.environ, "TRAINMEDIC_STATE_DIR": str(work / "state"), "NO_COLOR": "1"}
    bare = [sys.executable, "-c", "pass"]
    results = []
    for r in range(rounds):
        supervised = [sys.executable, "-c", CONSOLE_SCRIPT, "run", "--quiet", "--out", str(work / f"run{r}")]
        supervised += ["--", *bare]
        if r % 2 == 0:
            bare_s, supervised_s = _cpu_of(bare, env), _cpu_of(supervised, env)
        else:
            supervised_s, bare_s = _cpu_of(supervised, env), _cpu_of(bare, env)
        results.append(Round(bare_s, supervised_s))
    return results


def fixed_cost(rounds: int) -> tuple[float, list[Round]]:
    """The median fixed cost in CPU seconds, and the rounds it comes from."""
    with tempfile.TemporaryDirectory(prefix="trainmedic-fixed-cost-") as tmp:
        results = measure(rounds, Path(tmp))
    return statistics.median(r.fixed_s for r in results), results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="interleaved bare/supervised pairs (default 9)")
    args = parser.parse_args()
    print(
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, "
        f"python {sys.version.split()[0]}"
    )
    median, results = fixed_cost(args.rounds)
    for i, r in enumerate(results, 1):
        print(
            f"round {i}: bare {r.bare_s:.3f} s CPU, supervised {r.supervised_s:.3f} s, "
            f"fixed {r.fixed_s:.3f} s"
        )
    spread = sorted(r.fixed_s for r in results)
    print(
        f"supervisor fixed cost per run: {median:.3f} s CPU (median of {len(results)}; "
        f"{spread[0]:.3f}-{spread[-1]:.3f} s)  (target <= {TARGET_S} s)"
    )
    return 0 if median <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
