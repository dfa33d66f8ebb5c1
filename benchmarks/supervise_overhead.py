"""Overhead of `trainmedic run`: a CPU-bound Python job bare vs supervised, interleaved.

Prints the median wall-time ratio (supervised / bare; target <= 1.01) and the
supervisor's own CPU time as a share of the job's (target <= 1 %). The job
reports its own CPU time; the supervisor's is the CPU of everything the
benchmark waited for (supervisor + job, from getrusage) minus the job's.
Rounds alternate which variant goes first, so drift on a shared machine hits
both alike.

    python benchmarks/supervise_overhead.py --seconds 20 --runs 5
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JOB = """
import os, sys
n = int(sys.argv[1])
acc = 0
for i in range(n):
    acc += i * i % 7
t = os.times()
print(f"job-cpu {t.user + t.system:.4f}", flush=True)
"""
TRAINMEDIC = [str(Path(sys.executable).with_name("trainmedic"))]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(command: list[str]) -> tuple[float, float, float]:
    """(wall seconds, CPU of all waited-for processes, the job's own CPU)."""
    cpu0, t0 = children_cpu(), time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    job_cpu = next(float(line.split()[1]) for line in done.stdout.splitlines() if line.startswith("job-cpu"))
    return wall, cpu, job_cpu


def calibrate(job: Path, seconds: float) -> int:
    probe = 2_000_000
    wall, _, _ = run([sys.executable, str(job), str(probe)])
    return int(probe * seconds / wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the bare job")
    parser.add_argument("--runs", type=int, default=5, help="rounds (one bare + one supervised each)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        job = Path(tmp) / "job.py"
        job.write_text(JOB)
        n = calibrate(job, args.seconds)
        bare_cmd = [sys.executable, str(job), str(n)]
        ratios, shares, bare_walls, sup_walls = [], [], [], []
        for r in range(args.runs):
            out = Path(tmp) / f"run{r}"
            supervised_cmd = [*TRAINMEDIC, "run", "--quiet", "--out", str(out), "--", *bare_cmd]
            order = [("bare", bare_cmd), ("supervised", supervised_cmd)]
            results = {name: run(cmd) for name, cmd in (order if r % 2 == 0 else order[::-1])}
            (bare_wall, _, _), (sup_wall, sup_cpu, job_cpu) = results["bare"], results["supervised"]
            supervisor_cpu = max(0.0, sup_cpu - job_cpu)
            ratios.append(sup_wall / bare_wall)
            shares.append(supervisor_cpu / job_cpu)
            bare_walls.append(bare_wall)
            sup_walls.append(sup_wall)
            print(
                f"round {r + 1}: bare {bare_wall:.2f} s, supervised {sup_wall:.2f} s "
                f"(ratio {sup_wall / bare_wall:.4f}), supervisor CPU {supervisor_cpu:.3f} s "
                f"= {100 * supervisor_cpu / job_cpu:.2f} % of the job's {job_cpu:.2f} s",
                flush=True,
            )
    print(f"machine: {os.cpu_count()} CPUs, python {sys.version.split()[0]}")
    bare, sup = statistics.median(bare_walls), statistics.median(sup_walls)
    print(f"median bare wall {bare:.2f} s, supervised {sup:.2f} s")
    print(f"median wall-time ratio (supervised / bare): {statistics.median(ratios):.4f}  (target <= 1.01)")
    share = 100 * statistics.median(shares)
    print(f"median supervisor CPU share of the job:    {share:.2f} %  (target <= 1 %)")


if __name__ == "__main__":
    main()
