"""A trainer that floods its output: bare (to a file) vs `tee` vs `trainmedic run`, interleaved.

With `--end-to-end`: the wall-clock time of the whole command, from its start
to the exit of its last process, per line, for a Python `print` loop of 1,000,000 short lines
and for the same lines in 8 KiB `os.write` calls, `trainer | tee log` vs `trainmedic run --
trainer`, each minus the same command writing no line (the fixed start-up), medians over
rounds (the order rotates). `--shapes` prints lines of other shapes (`SHAPES`: per-step
prints that start like an epoch line, torchvision's MetricLogger, tqdm and Keras bars, the HF
Trainer's log dicts). Output to a file, and to a terminal (a pty that this process
drains): there also the trainer alone. Every command runs without PYTHONUNBUFFERED, as users
have it (a shell that exports it makes the `| tee` baseline unbuffered too).

Without it, the throughput for each kind of record (every command without
PYTHONUNBUFFERED too): the trainer is a Python process that writes records as fast as it can, of four kinds:
short log lines (~45 B), long lines (~900 B: a dict of 40 metrics), tqdm-style `\\r`
progress updates (a `\\n` every 1,000 updates) and binary garbage (100-byte random
records). Two writers:
`print` (one `write` call per record on `sys.stdout.buffer`: block-buffered when the output
is a file or a pipe, under `run` as under `tee`) and `block` (8 KiB `os.write` calls
everywhere, a buffered writer whatever the environment).

For each kind, writer and variant, per round (the variants' order rotates, so drift on
a shared machine hits all alike), medians over rounds:

- records per second: the second half of the records / the time the trainer spent
  writing them (what a flooding trainer is slowed to, once the supervisor's start is
  over; the consumer's backlog after that is at most a pipe);
- consumer CPU per record: `tee`'s CPU (wait4), or the supervisor process's own CPU (read
  by a wrapper at its exit, every thread), as the marginal cost (a run of a tenth of the
  records subtracted: the fixed part, start, the budget of 2,000 lines kept as events,
  the findings and the report, cancels out) and all in (only a `run` whose trainer
  writes nothing subtracted). Runs of the same round.

    python benchmarks/supervise_output.py --end-to-end --rounds 3
    python benchmarks/supervise_output.py --end-to-end --rounds 3 --writers print --where file --shapes \\
        plain epoch-like tutorial torchvision tqdm keras hf
    python benchmarks/supervise_output.py --rounds 5
    python benchmarks/supervise_output.py --rounds 3 --kinds short --writers print --no-paced
    python benchmarks/supervise_output.py --parsing-only

Then a trainer that prints a line per 1 ms step (flushed, as logging's StreamHandler
does): `tee`'s and the supervisor's CPU per line and share of a core (the supervisor's
minus that of a run that sleeps the same steps without printing). Last, the line parsing
alone, in this process: CPU per 64 KiB chunk of each kind (and with `--shapes`, of each shape)
once the budget of lines is spent.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
WRAPPER = """
import atexit, os, resource
def report():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    with open(os.environ["SUPERVISOR_CPU_FILE"], "w") as out:
        out.write(str(usage.ru_utime + usage.ru_stime))
atexit.register(report)
from trainmedic.cli.main import entry
entry()
"""
RECORDS_CODE = """
rng = random.Random(0)
if kind == "short":
    records = [f"step {i} loss {rng.random():.6f} lr 3.0e-04 grad 1.23\\n".encode() for i in range(n)]
elif kind == "long":
    keys = [f"{split}/{name}" for split in ("train", "val") for name in ("loss", "acc", "f1", "auc")] * 5
    line = lambda: str({k + str(j): round(rng.random(), 6) for j, k in enumerate(keys)}) + "\\n"
    records = [line().encode() for _ in range(n)]
elif kind == "bars":
    def bar(i):
        p = i % 1000 // 10
        text = f"\\r{p:3d}%|{'#' * (p // 10):10s}| {i % 1000}/1000 [00:01<00:02, 812.34it/s]"
        return text.encode() + (b"\\n" if i % 1000 == 999 else b"")
    records = [bar(i) for i in range(n)]
elif kind in ("paced", "idle"):
    records = [f"step {i} loss {rng.random():.6f} lr 3.0e-04 grad 1.23\\n".encode() for i in range(n)]
else:
    noise = rng.randbytes(1 << 20)
    records = [noise[i * 100 % (1 << 20) :][:100] for i in range(n)]
"""
TRAINER = (
    """
import os, random, sys, time
kind, writer, n, report = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
"""
    + RECORDS_CODE
    + """
out = sys.stdout.buffer
def write(records):
    if writer == "print":
        for record in records:
            out.write(record)
        out.flush()
    else:
        data = b"".join(records)
        for start in range(0, len(data), 8192):
            os.write(1, data[start : start + 8192])
if kind in ("paced", "idle"):  # a line per 1 ms step, flushed (logging's StreamHandler does)
    t0 = time.perf_counter()
    for i, record in enumerate(records):
        if kind == "paced":
            out.write(record)
            out.flush()
        time.sleep(max(0.0, t0 + (i + 1) * 0.001 - time.perf_counter()))
    with open(report, "w") as f:
        f.write(str(time.perf_counter() - t0))
    sys.exit()
write(records[: n // 2])  # the first half meets the supervisor's start (manifest, budget)
t0 = time.perf_counter()
write(records[n // 2 :])
with open(report, "w") as f:
    f.write(str(time.perf_counter() - t0))
"""
)
RECORDS = {"short": 400_000, "long": 40_000, "bars": 400_000, "binary": 200_000}
# The end-to-end trainer's lines, by shape: the f-string it prints at step i (in it, `NL[c]` is
# "\\n" where c holds, and `epoch(i)` the "Epoch k/N" line at an epoch's first step).
SHAPES = {
    "plain": "step {i} loss 0.693147 lr 3.0e-04 grad 1.23\n",
    # a per-step print that starts like an epoch line
    "epoch-like": "epoch 1 step {i} loss 0.5123 lr 0.001 it/s 123.4\n",
    # the PyTorch tutorials' print
    "tutorial": "Epoch [1/5], Step [{i}/1000000], Loss: 0.2193\n",
    # torchvision's reference scripts (MetricLogger.log_every)
    "torchvision": (
        "Epoch: [0]  [{i:7d}/1000000]  eta: 0:52:16  lr: 0.1  img/s: 245.63  loss: 6.9114 (6.9258)  "
        "acc1: 0.0000 (0.0710)  acc5: 0.7812 (0.5682)  time: 0.6253  data: 0.0012  max mem: 10138\n"
    ),
    # a tqdm bar: a `\\r` update a step, its line ends with the epoch (1,000 steps)
    "tqdm": (
        "\rEpoch {i // 1000}:  45%|####5     | {i % 1000}/1000 [00:12<00:15, 36.12it/s, loss=0.512]"
        "{NL[i % 1000 == 999]}"
    ),
    # Keras 3's progress bar (as on a terminal), after its "Epoch k/N" line
    "keras": (
        "{epoch(i)}\r{i % 1000 + 1:4d}/1000 ━━━━━━━━━━━━━━━━━━━━ 1s 2ms/step"
        " - accuracy: 0.8012 - loss: 0.5123{NL[i % 1000 == 999]}"
    ),
    # the HF Trainer with logging_steps=1: its tqdm bar, then tqdm.write of the log dict
    "hf": (
        "\r  5%|5         | {i}/1000000 [00:10<03:10,  4.98it/s]\r" + " " * 60 + "\r"
        "{{'loss': 0.5123, 'grad_norm': 1.2345, 'learning_rate': 4.99e-05, 'epoch': 0.01}}\n"
    ),
}
LINE_HELPERS = """
NL = ("", "\\n")
def epoch(i):
    return f"Epoch {i // 1000 + 1}/1000\\n" if i % 1000 == 0 else ""
"""
E2E_TRAINER = (
    """
import os, sys
writer, n = sys.argv[1], int(sys.argv[2])
"""
    + LINE_HELPERS
    + """
if writer == "print":  # a trainer's log: a print per line
    for i in range(n):
        print(LINE, end="")
else:  # the same lines in 8 KiB writes
    data = "".join(LINE for i in range(n)).encode()
    for start in range(0, len(data), 8192):
        os.write(1, data[start : start + 8192])
"""
)


def e2e_trainer(shape: str) -> str:
    """The end-to-end trainer's source for one shape of line."""
    return E2E_TRAINER.replace("LINE", "f" + repr(SHAPES[shape]))


def shape_output(shape: str, size: int) -> tuple[bytes, int]:
    """What the end-to-end trainer prints in that shape, made here: its first `size` bytes or
    more, and how many steps they hold."""
    namespace: dict[str, Any] = {}
    exec(LINE_HELPERS, namespace)
    line = eval("lambda i: f" + repr(SHAPES[shape]), namespace)
    lines: list[bytes] = []
    total = 0
    while total < size:
        lines.append(line(len(lines)).encode())
        total += len(lines[-1])
    return b"".join(lines), len(lines)


def wait_cpu(proc: subprocess.Popen[bytes]) -> float:
    """Wait for `proc` and return its CPU seconds (its own and its waited-for children's)."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime


def under_run(trainer: list[str], tmp: Path, env: dict[str, str], stdout: Any) -> float:
    """Run `trainer` under `trainmedic run` (this checkout's src); the supervisor's CPU seconds."""
    env.update(SUPERVISOR_CPU_FILE=str(tmp / "supervisor.txt"))
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, str(tmp / "wrapper.py"), "run", "--quiet", "--out", str(tmp / "run")]
    command = [*cmd, "--", *trainer]
    subprocess.run(command, stdout=stdout, stderr=subprocess.DEVNULL, env=env, check=True, cwd=tmp)
    return float((tmp / "supervisor.txt").read_text())


def trainer_cmd(tmp: Path, kind: str, writer: str, n: int) -> list[str]:
    return [sys.executable, str(tmp / "trainer.py"), kind, writer, str(n), str(tmp / "trainer.txt")]


def run_variant(variant: str, tmp: Path, kind: str, writer: str, n: int) -> tuple[float, float]:
    """(the trainer's writing seconds, the consumer's CPU seconds)."""
    trainer = trainer_cmd(tmp, kind, writer, n)
    env = users_env()
    with (tmp / "echo.out").open("wb") as echo:
        if variant == "bare":
            subprocess.run(trainer, stdout=echo, env=env, check=True)
            cpu = 0.0
        elif variant == "tee":
            producer = subprocess.Popen(trainer, stdout=subprocess.PIPE, env=env)
            assert producer.stdout is not None
            tee = subprocess.Popen(["tee", str(tmp / "tee.log")], stdin=producer.stdout, stdout=echo)
            producer.stdout.close()
            cpu = wait_cpu(tee)
            producer.wait()
        else:
            cpu = under_run(trainer, tmp, env, echo)
            subprocess.run(["rm", "-rf", str(tmp / "run")], check=True)
    seconds = float((tmp / "trainer.txt").read_text())
    return seconds, cpu


def users_env() -> dict[str, str]:
    """The environment as users have it: without PYTHONUNBUFFERED."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


class Terminal:
    """A pty standing in for the user's terminal: a thread drains it as fast as it can."""

    def __init__(self) -> None:
        import pty
        import threading

        self.ours, self.fd = pty.openpty()
        self.seen = 0
        self._drain = threading.Thread(target=self._read, daemon=True)
        self._drain.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.ours, 1 << 16)
            except OSError:  # EIO: closed
                return
            if not chunk:
                return
            self.seen += len(chunk)

    def close(self) -> None:
        os.close(self.fd)
        self._drain.join(timeout=10)
        os.close(self.ours)


def end_to_end_once(
    variant: str, where: str, tmp: Path, writer: str, n: int, shape: str = "plain"
) -> tuple[float, float]:
    """(wall seconds of the whole command, the supervisor's CPU seconds) for one command."""
    trainer = [sys.executable, str(tmp / f"e2e-{shape}.py"), writer, str(n)]
    env = users_env()
    terminal = Terminal() if where == "terminal" else None
    with (tmp / "echo.out").open("wb") as file:
        out = terminal.fd if terminal is not None else file.fileno()
        start = time.perf_counter()
        cpu = 0.0
        if variant == "bare":
            subprocess.run(trainer, stdout=out, env=env, check=True)
        elif variant == "tee":
            producer = subprocess.Popen(trainer, stdout=subprocess.PIPE, env=env)
            assert producer.stdout is not None
            tee = subprocess.Popen(["tee", str(tmp / "tee.log")], stdin=producer.stdout, stdout=out, env=env)
            producer.stdout.close()
            tee.wait()
            producer.wait()
        else:
            cpu = under_run(trainer, tmp, env, out)
        wall = time.perf_counter() - start
    if terminal is not None:
        terminal.close()
    subprocess.run(["rm", "-rf", str(tmp / "run")], check=True)
    return wall, cpu


def end_to_end(tmp: Path, args: argparse.Namespace) -> None:
    """Per line, end to end, fixed start-up removed: `| tee` vs `run`, to a file and to a terminal,
    for each shape of line and writer."""
    for shape in args.shapes:
        (tmp / f"e2e-{shape}.py").write_text(e2e_trainer(shape), encoding="utf-8")
    if "PYTHONUNBUFFERED" in os.environ:
        print("(PYTHONUNBUFFERED is set here: removed for every command measured)", file=sys.stderr)
    cases = [(where, variant) for where in args.where for variant in ("bare", "tee", "run")]
    cases = [c for c in cases if c != ("file", "bare")]
    lines = args.lines
    wall: dict[tuple[str, str, str, str], list[float]] = {}
    cpu: dict[tuple[str, str, str, str], list[float]] = {}
    for r in range(args.rounds):
        for shape in args.shapes:
            for writer in args.writers:
                for where, variant in cases[r % len(cases) :] + cases[: r % len(cases)]:
                    fixed, fixed_cpu = end_to_end_once(variant, where, tmp, writer, 0, shape)
                    seconds, used = end_to_end_once(variant, where, tmp, writer, lines, shape)
                    wall.setdefault((shape, writer, where, variant), []).append((seconds - fixed) / lines)
                    cpu.setdefault((shape, writer, where, variant), []).append((used - fixed_cpu) / lines)
        got = ", ".join(f"{' '.join(k)} {v[-1] * 1e6:.2f}" for k, v in wall.items())
        print(f"end to end: round {r + 1}/{args.rounds}, µs a line: {got}", file=sys.stderr)
    print(
        f"\n| {lines:,} lines, end to end | shape | output to | trainer alone | `\\| tee` | `run` "
        "| run / tee | run / alone | supervisor CPU |\n|---|---|---|---|---|---|---|---|---|"
    )
    for shape in args.shapes:
        for writer in args.writers:
            for where in args.where:
                key = (shape, writer, where)
                per = {v: statistics.median(wall[(*key, v)]) * 1e6 for w, v in cases if w == where}
                run_cpu = statistics.median(cpu[(*key, "run")]) * 1e6
                alone = f"{per['bare']:.2f} µs" if "bare" in per else "-"
                ratio = f"{per['run'] / per['bare']:.2f}" if "bare" in per else "-"
                label = "print loop" if writer == "print" else "8 KiB writes"
                print(
                    f"| {label} | {shape} | {where} | {alone} | {per['tee']:.2f} µs | {per['run']:.2f} µs "
                    f"| {per['run'] / per['tee']:.2f} | {ratio} | {run_cpu:.2f} µs |"
                )


def paced(tmp: Path, rounds: int) -> None:
    """A trainer that prints a line per 1 ms step: the consumer's CPU per line and share of a
    core, in steady state (the supervisor's figure: 9,000 lines minus 3,000, each minus a run
    that sleeps as long without printing, so start, sampling and the line budget cancel out)."""
    short, long = 3000, 9000
    cpu: dict[str, list[float]] = {"tee": [], "run": []}
    for _ in range(rounds):
        _, used = run_variant("tee", tmp, "paced", "print", long)
        cpu["tee"].append(used / long)
        extra = {}
        for n in (short, long):
            _, idle = run_variant("run", tmp, "idle", "print", n)
            _, used = run_variant("run", tmp, "paced", "print", n)
            extra[n] = used - idle
        cpu["run"].append((extra[long] - extra[short]) / (long - short))
    tee_cpu, run_cpu = (statistics.median(cpu[v]) * 1e6 for v in ("tee", "run"))
    print("\n| a line per 1 ms step (steady state) | tee | run |\n|---|---|---|")
    print(f"| CPU per line | {tee_cpu:.1f} µs | {run_cpu:.1f} µs |")
    print(f"| share of a core | {tee_cpu / 1e3:.2%} | {run_cpu / 1e3:.2%} |")


def parsing(kinds: list[str], shapes: list[str]) -> None:
    """The line parsing alone, in this process: `LineScanner.feed` of 64 KiB chunks once the
    budget of lines is spent (the scan for the lines that may matter, and the stream's tail),
    CPU per chunk, the least of 15 repeats of 20 chunks (steady under a shared machine's load);
    for each kind of record, then each shape of the end-to-end trainer's lines."""
    import random

    sys.path.insert(0, str(REPO / "src"))
    from trainmedic.supervise.loginterp import LogInterpreter
    from trainmedic.supervise.logstream import LineScanner

    outputs = []
    for kind in kinds:
        namespace: dict[str, object] = {"kind": kind, "n": 20_000, "random": random}
        exec(RECORDS_CODE, namespace)
        records: list[bytes] = namespace["records"]  # type: ignore[assignment]
        outputs.append((kind, b"".join(records), len(records)))
    outputs += [(f"{shape} (lines)", *shape_output(shape, 20 * 65536)) for shape in shapes]
    print("\n| records | parsing CPU per 64 KiB chunk | per byte | per record |\n|---|---|---|---|")
    for kind, data, count in outputs:
        chunks = [data[i : i + 65536] for i in range(0, 20 * 65536, 65536)]
        logs = LogInterpreter(lambda event: None)
        logs._budget = 0
        scanner = LineScanner("stdout", logs)
        best = float("inf")
        for _ in range(15):
            start = time.process_time()
            for chunk in chunks:
                scanner.feed(chunk)
            best = min(best, (time.process_time() - start) / len(chunks))
        per_record = best * len(data) / count / 65536
        print(f"| {kind} | {best * 1e6:.0f} µs | {best / 65536 * 1e9:.2f} ns | {per_record * 1e6:.2f} µs |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kinds", nargs="+", default=list(RECORDS), choices=list(RECORDS))
    parser.add_argument("--writers", nargs="+", default=["print", "block"], choices=["print", "block"])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the record counts")
    parser.add_argument("--no-paced", dest="paced", action="store_false", help="skip the 1 ms step trainer")
    parser.add_argument("--parsing-only", action="store_true", help="only the line parsing, in this process")
    parser.add_argument("--end-to-end", action="store_true", help="only the end-to-end time per line")
    parser.add_argument("--lines", type=int, default=1_000_000, help="lines of the end-to-end trainer")
    parser.add_argument(
        "--shapes", nargs="+", choices=list(SHAPES), help="of the end-to-end trainer's lines (default: plain)"
    )
    parser.add_argument("--where", nargs="+", default=["file", "terminal"], choices=["file", "terminal"])
    args = parser.parse_args()
    if args.parsing_only:
        parsing(args.kinds, args.shapes or [])
        return
    if args.end_to_end:
        args.shapes = args.shapes or ["plain"]
        with tempfile.TemporaryDirectory() as name:
            (Path(name) / "wrapper.py").write_text(WRAPPER)
            end_to_end(Path(name), args)
        return
    variants = ["bare", "tee", "run"]
    rates: dict[tuple[str, str, str], list[float]] = {}
    cpus: dict[tuple[str, str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        (tmp / "trainer.py").write_text(TRAINER)
        (tmp / "wrapper.py").write_text(WRAPPER)
        for r in range(args.rounds):
            _, fixed = run_variant("run", tmp, "short", "print", 0)
            for kind in args.kinds:
                n = int(RECORDS[kind] * args.scale)
                for writer in args.writers:
                    _, tenth = run_variant("run", tmp, kind, writer, n // 10)
                    for variant in variants[r % 3 :] + variants[: r % 3]:
                        seconds, cpu = run_variant(variant, tmp, kind, writer, n)
                        key = (kind, writer, variant)
                        rates.setdefault(key, []).append((n - n // 2) / seconds)
                        cpus.setdefault(key, []).append(cpu / n)
                        if variant == "run":
                            cpus.setdefault((kind, writer, "run marginal"), []).append(
                                (cpu - tenth) / (n - n // 10)
                            )
                            cpus[key][-1] = (cpu - fixed) / n
            print(f"round {r + 1}/{args.rounds} done (a run's fixed CPU: {fixed:.3f} s)", file=sys.stderr)
        table(args, rates, cpus)
        if args.paced:
            paced(tmp, args.rounds)
    parsing(args.kinds, [])


def table(
    args: argparse.Namespace,
    rates: dict[tuple[str, str, str], list[float]],
    cpus: dict[tuple[str, str, str], list[float]],
) -> None:
    variants = ["bare", "tee", "run"]
    print(
        "| records | writer | bare rec/s | tee rec/s | run rec/s | run / tee "
        "| CPU per record: tee | run, marginal | run, all in |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for kind in args.kinds:
        for writer in args.writers:
            rate = {v: statistics.median(rates[(kind, writer, v)]) for v in variants}
            cpu = {v: statistics.median(cpus[(kind, writer, v)]) * 1e6 for v in [*variants, "run marginal"]}
            print(
                f"| {kind} | {writer} | {rate['bare'] / 1e3:.0f} k | {rate['tee'] / 1e3:.0f} k | "
                f"{rate['run'] / 1e3:.0f} k | {rate['run'] / rate['tee']:.2f} | "
                f"{cpu['tee']:.2f} µs | {cpu['run marginal']:.2f} µs | {cpu['run']:.2f} µs |"
            )


if __name__ == "__main__":
    started = time.time()
    main()
    print(f"({time.time() - started:.0f} s)", file=sys.stderr)
