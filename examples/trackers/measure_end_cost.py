"""What attaching the diagnosis to a tracker adds at the end of a run, and what it adds during it.

    python examples/trackers/measure_end_cost.py [--repeats 3] [--steps 200]

For MLflow (a SQLite store) and W&B (offline), runs the diverging example in a fresh temporary
folder, `repeats` times each way, interleaved, and prints medians:

- during the run: the CPU time of the example's own training loop (it prints it) under
  `trainmedic run --no-instrument` (no hooks in the trainer: "bare") and `trainmedic run`
  (with the hooks that learn the tracker run); the loop logs a metric every step;
- at the end: the wall and CPU time (of the whole process tree) of `trainmedic run --tracker
  none` and `--tracker auto`; their difference is what reading the run's curves back and
  attaching tags/summary, findings.json and report.html add after the trainer has exited.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = {"mlflow": HERE / "diverge_mlflow.py", "wandb": HERE / "diverge_wandb.py"}
LOOP = re.compile(r"loop ([0-9.]+) s, ([0-9.]+) s CPU")


def once(tracker: str, how: str, steps: int) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds of the whole process tree, CPU seconds of the example's loop)
    of one run: how = bare | none | auto."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "MLFLOW_TRACKING_URI": f"sqlite:///{tmp}/mlflow.db",
            "WANDB_MODE": "offline",
            "WANDB_SILENT": "true",
            "WANDB_DIR": tmp,
        }
        script = [sys.executable, str(SCRIPTS[tracker]), "--steps", str(steps)]
        trainmedic = str(Path(sys.executable).with_name("trainmedic"))
        options = ["--no-instrument", "--tracker", "none"] if how == "bare" else ["--tracker", how]
        prefix = [trainmedic, "run", "--quiet", "--out", f"{tmp}/run", *options, "--"]
        t0, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        done = subprocess.run(
            [*prefix, *script], capture_output=True, text=True, env=env, cwd=tmp, check=False
        )
        wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        assert done.returncode == 0, done.stderr
        loop = LOOP.search(done.stdout)
        assert loop is not None, done.stdout
        return wall, cpu, float(loop.group(2))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    for tracker in SCRIPTS:
        runs: dict[str, list[tuple[float, float, float]]] = {"bare": [], "none": [], "auto": []}
        for _ in range(args.repeats):
            for how, results in runs.items():
                results.append(once(tracker, how, args.steps))
        wall, cpu, loop = (
            {how: statistics.median(r[i] for r in results) for how, results in runs.items()} for i in range(3)
        )
        print(
            f"{tracker}: loop of {args.steps} logged steps, CPU no hooks {loop['bare']:.3f} s, "
            f"with the hooks {loop['auto']:.3f} s; whole run --tracker none {wall['none']:.2f} s "
            f"({cpu['none']:.2f} s CPU), auto {wall['auto']:.2f} s ({cpu['auto']:.2f} s CPU); "
            f"added at the end {wall['auto'] - wall['none']:+.2f} s ({cpu['auto'] - cpu['none']:+.2f} s CPU)"
        )


if __name__ == "__main__":
    main()
