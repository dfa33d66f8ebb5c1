"""Overhead of `trainmedic run`: a CPU-bound Python job bare vs supervised, interleaved.

Prints, over several rounds (which variant goes first alternates, so drift on a
shared machine hits both alike):

- the median wall-time ratio, supervised / bare (target <= 1.01 for a ~20 s job);
- the supervisor's own CPU time as a share of the job's (target <= 1 %): the CPU of
  everything the benchmark waited for (supervisor + job, getrusage) minus the CPU
  the job reports for itself;
- the job's own CPU supervised / bare (what the in-process boot module costs);
- the fixed cost per run (a job that does nothing) and the supervisor's steady CPU
  per second of run, so the figures can be projected to runs of any length, and
  read on a busy machine where wall times are noisy.

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


def pair(job: Path, n: int, out: Path, bare_first: bool) -> dict[str, tuple[float, float, float]]:
    bare_cmd = [sys.executable, str(job), str(n)]
    supervised_cmd = [*TRAINMEDIC, "run", "--quiet", "--out", str(out), "--", *bare_cmd]
    order = [("bare", bare_cmd), ("supervised", supervised_cmd)]
    return {name: run(cmd) for name, cmd in (order if bare_first else order[::-1])}


def calibrate(job: Path, seconds: float) -> int:
    """Iterations for `seconds` of job CPU: a probe of a few seconds, less the interpreter's start-up."""
    probe = 20_000_000
    _, _, empty = run([sys.executable, str(job), "0"])
    _, _, cpu = run([sys.executable, str(job), str(probe)])
    return int(probe * seconds / max(cpu - empty, 1e-3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="CPU seconds of the job")
    parser.add_argument("--runs", type=int, default=5, help="rounds (one bare + one supervised each)")
    parser.add_argument("--fixed-runs", type=int, default=5, help="rounds of the empty job")
    args = parser.parse_args()
    print(
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, "
        f"python {sys.version.split()[0]}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        job = Path(tmp) / "job.py"
        job.write_text(JOB)
        fixed_wall, fixed_cpu = [], []
        for r in range(args.fixed_runs):
            res = pair(job, 0, Path(tmp) / f"fixed{r}", r % 2 == 0)
            fixed_wall.append(res["supervised"][0] - res["bare"][0])
            fixed_cpu.append(res["supervised"][1] - res["supervised"][2] - res["bare"][1])
        fixed = statistics.median(fixed_cpu)
        print(
            f"fixed cost per run (empty job): +{statistics.median(fixed_wall):.3f} s wall, "
            f"{fixed:.3f} s supervisor CPU (start-up, imports, diagnosis)"
        )
        n = calibrate(job, args.seconds)
        ratios, shares, job_ratios, steady = [], [], [], []
        for r in range(args.runs):
            res = pair(job, n, Path(tmp) / f"run{r}", r % 2 == 0)
            (bare_wall, _, bare_job), (sup_wall, sup_cpu, sup_job) = res["bare"], res["supervised"]
            supervisor_cpu = max(0.0, sup_cpu - sup_job)
            ratios.append(sup_wall / bare_wall)
            shares.append(supervisor_cpu / sup_job)
            job_ratios.append(sup_job / bare_job)
            steady.append(max(0.0, supervisor_cpu - fixed) / sup_wall)
            print(
                f"round {r + 1}: bare {bare_wall:.2f} s, supervised {sup_wall:.2f} s "
                f"(ratio {sup_wall / bare_wall:.4f}); supervisor CPU {supervisor_cpu:.3f} s "
                f"= {100 * supervisor_cpu / sup_job:.2f} % of the job's {sup_job:.2f} s; "
                f"job CPU supervised/bare {sup_job / bare_job:.4f}",
                flush=True,
            )
    print(f"load average now {os.getloadavg()[0]:.1f}")
    print(f"median wall-time ratio (supervised / bare): {statistics.median(ratios):.4f}  (target <= 1.01)")
    print(
        f"median supervisor CPU share of the job:    {100 * statistics.median(shares):.2f} %  (target <= 1 %)"
    )
    print(f"median job CPU supervised / bare:          {statistics.median(job_ratios):.4f}")
    print(f"supervisor steady CPU while sampling:      {100 * statistics.median(steady):.3f} % of one core")


if __name__ == "__main__":
    main()
