"""Overhead of `trainmedic run`: a CPU-bound Python job bare vs supervised, interleaved.

Prints, over several rounds (which variant goes first alternates, so drift on a
shared machine hits both alike):

- the median wall-time ratio, supervised / bare (target <= 1.01 for a ~20 s job);
- the supervisor's own CPU time as a share of the job's (target <= 1 %): the
  supervisor process's CPU, read exactly by a wrapper at its exit (getrusage of
  the process itself, every thread), plus the git processes it starts for the
  manifest (timed on their own in the same folder); the job's CPU is what it
  reports for itself;
- beside it, the older and coarser figure: the CPU of everything the benchmark
  waited for minus the CPU the job reports, which also counts the job's own
  teardown after its report (the interpreter's exit, the boot module's exit
  handler: ~10-20 ms per run);
- the job's own CPU supervised / bare (what the in-process boot module costs);
- the fixed cost per run (a job that does nothing) and the supervisor's steady CPU
  per second of run, so the figures can be projected to runs of any length, and
  read on a busy machine where wall times are noisy.

    python benchmarks/supervise_overhead.py --seconds 20 --runs 5
    python benchmarks/supervise_overhead.py --seconds 20 --runs 7 --pin 1   # one core for all

The job is sized again before each round from the last bare run's CPU, so it stays near
`--seconds` of CPU while the machine's speed drifts.
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

# Runs the CLI as the console script does and writes the process's own CPU at its exit
# (the last exit handler: registered first, run last).
WRAPPER = """
import atexit, os, resource, sys
def report():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    with open(os.environ["SUPERVISOR_CPU_FILE"], "w") as out:
        out.write(str(usage.ru_utime + usage.ru_stime))
atexit.register(report)
from trainmedic.cli.main import entry
entry()
"""
JOB = """
import os, sys
n = int(sys.argv[1])
acc = 0
for i in range(n):
    acc += i * i % 7
t = os.times()
print(f"job-cpu {t.user + t.system:.4f}", flush=True)
"""


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(command: list[str], own_cpu_file: Path | None = None) -> tuple[float, float, float, float]:
    """(wall seconds, CPU of all waited-for processes, the job's own CPU, the supervisor
    process's own CPU: 0 for a bare run)."""
    env = dict(os.environ, SUPERVISOR_CPU_FILE=str(own_cpu_file)) if own_cpu_file else None
    cpu0, t0 = children_cpu(), time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    job_cpu = next(float(line.split()[1]) for line in done.stdout.splitlines() if line.startswith("job-cpu"))
    own = float(own_cpu_file.read_text()) if own_cpu_file else 0.0
    return wall, cpu, job_cpu, own


def pair(
    job: Path, wrapper: Path, n: int, out: Path, bare_first: bool
) -> dict[str, tuple[float, float, float, float]]:
    bare_cmd = [sys.executable, str(job), str(n)]
    supervised_cmd = [sys.executable, str(wrapper), "run", "--quiet", "--out", str(out), "--", *bare_cmd]
    own_file = out.with_name(out.name + ".cpu")
    order = [("bare", bare_cmd, None), ("supervised", supervised_cmd, own_file)]
    return {name: run(cmd, own) for name, cmd, own in (order if bare_first else order[::-1])}


def git_cpu(repeats: int = 5) -> float:
    """CPU of the git processes the manifest starts in this folder (median of `repeats`)."""
    from trainmedic.envinfo import git_state

    costs = []
    for _ in range(repeats):
        before = children_cpu()
        git_state(Path.cwd())
        costs.append(children_cpu() - before)
    return statistics.median(costs)


def calibrate(job: Path, seconds: float) -> int:
    """Iterations for `seconds` of job CPU: a probe of a few seconds, less the interpreter's start-up."""
    probe = 20_000_000
    _, _, empty, _ = run([sys.executable, str(job), "0"])
    _, _, cpu, _ = run([sys.executable, str(job), str(probe)])
    return int(probe * seconds / max(cpu - empty, 1e-3))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="CPU seconds of the job")
    parser.add_argument("--runs", type=int, default=5, help="rounds (one bare + one supervised each)")
    parser.add_argument("--fixed-runs", type=int, default=5, help="rounds of the empty job")
    parser.add_argument(
        "--pin",
        type=int,
        metavar="CPU",
        help="run everything on this one CPU (on a VM whose cores are stolen unevenly, the job and "
        "the supervisor then see the same machine; the supervisor's CPU then adds to the wall time)",
    )
    args = parser.parse_args()
    if args.pin is not None:
        os.sched_setaffinity(0, {args.pin})
    print(
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, "
        f"python {sys.version.split()[0]}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        job, wrapper = Path(tmp) / "job.py", Path(tmp) / "trainmedic_cli.py"
        job.write_text(JOB)
        wrapper.write_text(WRAPPER)
        helpers = git_cpu()
        print(f"git processes of the manifest in {Path.cwd()}: {1000 * helpers:.1f} ms of CPU per run")
        fixed_wall, fixed_cpu = [], []
        for r in range(args.fixed_runs):
            res = pair(job, wrapper, 0, Path(tmp) / f"fixed{r}", r % 2 == 0)
            fixed_wall.append(res["supervised"][0] - res["bare"][0])
            fixed_cpu.append(res["supervised"][3] + helpers)
        fixed = statistics.median(fixed_cpu)
        print(
            f"fixed cost per run (empty job): +{statistics.median(fixed_wall):.3f} s wall, "
            f"{fixed:.3f} s supervisor CPU (start-up, imports, manifest, diagnosis, report)"
        )
        n = calibrate(job, args.seconds)
        ratios, shares, coarse, job_ratios, steady = [], [], [], [], []
        for r in range(args.runs):
            res = pair(job, wrapper, n, Path(tmp) / f"run{r}", r % 2 == 0)
            (bare_wall, _, bare_job, _), (sup_wall, sup_cpu, sup_job, own) = res["bare"], res["supervised"]
            # this VM's speed drifts by tens of percent: the next round's job is sized again from
            # this bare run, so the job stays near `--seconds` of CPU at the speed of the moment
            n = max(1, int(n * args.seconds / max(bare_job, 1e-3)))
            supervisor_cpu = own + helpers
            ratios.append(sup_wall / bare_wall)
            shares.append(supervisor_cpu / sup_job)
            coarse.append(max(0.0, sup_cpu - sup_job) / sup_job)
            job_ratios.append(sup_job / bare_job)
            steady.append(max(0.0, supervisor_cpu - fixed) / sup_wall)
            print(
                f"round {r + 1}: bare {bare_wall:.2f} s, supervised {sup_wall:.2f} s "
                f"(ratio {sup_wall / bare_wall:.4f}); supervisor CPU {supervisor_cpu:.3f} s "
                f"= {100 * supervisor_cpu / sup_job:.2f} % of the job's {sup_job:.2f} s "
                f"(coarse: {100 * coarse[-1]:.2f} %); job CPU supervised/bare {sup_job / bare_job:.4f}",
                flush=True,
            )
    print(f"load average now {os.getloadavg()[0]:.1f}")
    print(f"median wall-time ratio (supervised / bare): {statistics.median(ratios):.4f}  (target <= 1.01)")
    print(
        f"median supervisor CPU share of the job:    {100 * statistics.median(shares):.2f} %  (target <= 1 %)"
    )
    print(f"  coarse (all CPU waited for - job's own):  {100 * statistics.median(coarse):.2f} %")
    print(f"median job CPU supervised / bare:          {statistics.median(job_ratios):.4f}")
    print(f"supervisor steady CPU while sampling:      {100 * statistics.median(steady):.3f} % of one core")


if __name__ == "__main__":
    main()
