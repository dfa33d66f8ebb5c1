"""Scale of `trainmedic diagnose`: a TensorBoard log of 1M scalars and a 100 MB trainer_state.json.

    python benchmarks/diagnose_scale.py [--points 1000000] [--mb 100] [--no-peers]

Each `trainmedic diagnose` runs as its own process (what a user runs); seconds are
wall time, peak memory the child's max RSS. Side by side, in the same run:
tensorboard's own readers on the same event file (EventAccumulator keeping every
point, and the raw record loader + protobuf parse), and a bare `json.load` of the
trainer state (the floor for any JSON reader).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TAGS = ("train/loss", "train/lr", "train/grad_norm", "train/accuracy")


def write_tensorboard(folder: Path, points: int) -> Path:
    """len(TAGS) tags x points/len(TAGS) steps, written by TensorFlow's own TFRecord writer."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    from tensorboard.compat.proto import event_pb2, summary_pb2

    path = folder / "events.out.tfevents.1700000000.bench"
    steps = points // len(TAGS)
    with tf.io.TFRecordWriter(str(path)) as writer:
        writer.write(event_pb2.Event(wall_time=1.7e9, file_version="brain.Event:2").SerializeToString())
        for step in range(steps):
            loss = 0.2 + 2.0 * math.exp(-step / (steps / 5)) + 0.05 * math.sin(step)
            for tag, value in zip(TAGS, (loss, 1e-3, 1.0, 1 - loss / 3), strict=True):
                summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
                event = event_pb2.Event(wall_time=1.7e9 + step * 0.1, step=step, summary=summary)
                writer.write(event.SerializeToString())
    return path


def write_trainer_state(folder: Path, megabytes: int) -> Path:
    """An HF trainer_state.json (indent=2, sorted keys, as the Trainer writes it) of about `megabytes` MB."""
    history = []
    step = 0
    size = 0
    while size < megabytes * 1_000_000:
        step += 1
        entry = {
            "epoch": step / 10000,
            "grad_norm": 1.0 + 0.1 * math.sin(step),
            "learning_rate": 5e-5 * (1 - step / 2e6),
            "loss": 0.3 + 2.0 * math.exp(-step / 1e5) + 0.02 * math.sin(step),
            "step": step,
        }
        history.append(entry)
        size += 165
        if step % 1000 == 0:
            history.append(
                {"epoch": step / 10000, "eval_loss": entry["loss"] * 1.1, "eval_runtime": 3.2, "step": step}
            )
    state = {
        "best_metric": None,
        "epoch": step / 10000,
        "global_step": step,
        "log_history": history,
        "logging_steps": 1,
        "max_steps": step,
        "num_train_epochs": math.ceil(step / 10000),
        "train_batch_size": 8,
    }
    path = folder / "trainer_state.json"
    path.write_text(json.dumps(state, indent=2, sort_keys=True))
    return path


def timed(argv: list[str]) -> tuple[float, float, float, str]:
    """(wall s, CPU s, peak RSS MiB, stdout) of one child process (os.wait4: that child's own rusage)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{argv} failed: {err.read()[-2000:]}")
        return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out.read()


def generate(function: str, folder: Path, size: int) -> None:
    """Write an input in a child process: the parent must stay small for the RSS figures."""
    code = f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import diagnose_scale as d;"
    code += f"d.{function}(__import__('pathlib').Path({str(folder)!r}), {size})"
    subprocess.run([sys.executable, "-c", code], check=True)


def python_snippet(code: str) -> list[str]:
    return [sys.executable, "-c", code]


PEER_ACCUMULATOR = (
    "import sys; from tensorboard.backend.event_processing.event_accumulator import EventAccumulator as A;"
    "a = A(sys.argv[1], size_guidance={'scalars': 0}); a.Reload();"
    "print(sum(len(a.Scalars(t)) for t in a.Tags()['scalars']))"
)
PEER_RAW = (
    "import sys; from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader;"
    "from tensorboard.compat.proto import event_pb2; n = 0\n"
    "for r in RawEventFileLoader(sys.argv[1]).Load():\n"
    "    e = event_pb2.Event.FromString(r)\n"
    "    n += len(e.summary.value)\n"
    "print(n)"
)
JSON_FLOOR = "import json, sys; d = json.load(open(sys.argv[1])); print(len(d['log_history']))"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--no-peers", action="store_true", help="skip tensorboard's own readers (slow)")
    args = parser.parse_args()
    diagnose = [sys.executable, "-m", "trainmedic", "diagnose", "--format", "json"]
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        t0 = time.perf_counter()
        events = folder / "events.out.tfevents.1700000000.bench"
        generate("write_tensorboard", folder, args.points)
        took = time.perf_counter() - t0
        print(f"wrote {events.stat().st_size / 1e6:.1f} MB of TensorBoard events in {took:.1f} s")
        t0 = time.perf_counter()
        state = folder / "trainer_state.json"
        generate("write_trainer_state", folder, args.mb)
        took = time.perf_counter() - t0
        print(f"wrote {state.stat().st_size / 1e6:.1f} MB trainer_state.json in {took:.1f} s")
        rows = []
        runs = [
            ("trainmedic diagnose (TensorBoard)", [*diagnose, str(events)]),
            ("trainmedic diagnose (trainer_state.json)", [*diagnose, str(state)]),
            ("json.load of the same trainer_state.json", [*python_snippet(JSON_FLOOR), str(state)]),
        ]
        if not args.no_peers:
            runs += [
                ("tensorboard RawEventFileLoader + protobuf", [*python_snippet(PEER_RAW), str(events)]),
                (
                    "tensorboard EventAccumulator (all points)",
                    [*python_snippet(PEER_ACCUMULATOR), str(events)],
                ),
            ]
        for name, argv in runs:
            wall, cpu, peak, out = timed(argv)
            text = out.strip()
            points = json.loads(text)["sources"][0]["points"] if text.startswith("{") else int(text)
            rows.append((name, wall, cpu, peak, points))
    print(f"\n{'reader':<44}{'wall s':>8}{'CPU s':>8}{'peak MiB':>10}{'points':>10}")
    for name, wall, cpu, peak, n in rows:
        print(f"{name:<44}{wall:>8.2f}{cpu:>8.2f}{peak:>10.0f}{n:>10}")
    cpu_of = {name: cpu for name, _, cpu, _, _ in rows}
    tb = cpu_of["trainmedic diagnose (TensorBoard)"]
    hf = cpu_of["trainmedic diagnose (trainer_state.json)"]
    print(f"\nCPU ratios: trainmedic / json.load on the trainer state: {hf / cpu_of[rows[2][0]]:.2f}x")
    for name in [r[0] for r in rows[3:]]:
        print(f"CPU ratios: {name} / trainmedic on the event file: {cpu_of[name] / tb:.1f}x")
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
