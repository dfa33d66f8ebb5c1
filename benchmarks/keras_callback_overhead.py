"""Overhead of trainmedic's auto-added Keras callbacks on a small, fast model.

A 2 x 256 MLP trains 2,000 steps per fit, bare (Keras's own fit) and
instrumented (the fit `trainmedic run` installs: the head/tail callbacks with
phases, epochs, sampled steps, events written to a real JSONL file), in
alternating pairs in one process. Prints each pair and the median ratio
(target <= 1.02) of wall time and of the process's CPU time (the CPU ratio is the
steadier one on a shared machine). A small model is the worst case: the per-step
work is tiny, so any per-step cost of the callback shows.

    python benchmarks/keras_callback_overhead.py [--pairs 7] [--steps 2000]
    TF_USE_LEGACY_KERAS=1 python benchmarks/keras_callback_overhead.py     # legacy tf-keras
    KERAS_BACKEND=torch python benchmarks/keras_callback_overhead.py       # Keras 3 on torch
"""

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from trainmedic.eventlog.writer import EventWriter
from trainmedic.keras import _auto as instrument_keras

if os.environ.get("TF_USE_LEGACY_KERAS") == "1":
    import tf_keras as keras
else:
    import keras

parser = argparse.ArgumentParser()
parser.add_argument("--pairs", type=int, default=7)
parser.add_argument("--steps", type=int, default=2000)
parser.add_argument("--epochs", type=int, default=4, help="the steps are spread over this many epochs")
args = parser.parse_args()

bare_fit = keras.Model.fit  # Keras's own, kept before trainmedic patches the class
events = Path(tempfile.mkdtemp()) / "events.jsonl"
writer = EventWriter(events)
instrument_keras.install(keras, sink=writer.emit)

keras.utils.set_random_seed(0)
batch = 32
x = np.random.normal(size=(args.steps // args.epochs * batch, 64)).astype("float32")
y = np.random.randint(0, 10, size=(len(x),))
model = keras.Sequential(
    [
        keras.Input((64,)),
        keras.layers.Dense(256, activation="relu"),
        keras.layers.Dense(256, activation="relu"),
        keras.layers.Dense(10),
    ]
)
model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))


def timed(instrumented: bool) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of one fit."""
    wall, cpu = time.perf_counter(), time.process_time()
    if instrumented:
        model.fit(x, y, batch_size=batch, epochs=args.epochs, verbose=0)
    else:
        bare_fit(model, x, y, batch_size=batch, epochs=args.epochs, verbose=0)
    return time.perf_counter() - wall, time.process_time() - cpu


timed(False)  # warm-up: builds the train function, fills caches
timed(True)
wall_ratios, cpu_ratios, bare_walls = [], [], []
print(f"{'pair':>4} {'bare s':>8} {'trainmedic s':>13} {'wall ratio':>10} {'cpu ratio':>10}")
for pair in range(args.pairs):
    if pair % 2:  # alternate the order so drift of the machine cancels
        watched, bare = timed(True), timed(False)
    else:
        bare, watched = timed(False), timed(True)
    bare_walls.append(bare[0])
    wall_ratios.append(watched[0] / bare[0])
    cpu_ratios.append(watched[1] / bare[1])
    print(f"{pair:>4} {bare[0]:8.3f} {watched[0]:13.3f} {wall_ratios[-1]:10.3f} {cpu_ratios[-1]:10.3f}")


def hook_cost_us(n: int = 20000) -> float:
    """Microseconds the two callbacks add to one batch, timed on the CallbackList fit uses."""
    from trainmedic.keras._recorder import FitRecorder, callback_pair

    recorder = FitRecorder(writer.emit, framework="bench", plan={})
    recorder.train_begin({"epochs": 1, "steps": n})
    recorder.epoch_begin(0)
    logs = {"loss": 0.5}
    costs = []
    for cbs in ([], list(callback_pair(keras, recorder))):
        callback_list = keras.callbacks.CallbackList(cbs, model=model)
        start = time.perf_counter()
        for i in range(n):
            callback_list.on_train_batch_begin(i)
            callback_list.on_train_batch_end(i, logs)
        costs.append((time.perf_counter() - start) / n * 1e6)
    return costs[1] - costs[0]


line = instrument_keras.keras_line(keras)
lines = sum(1 for _ in events.open())
print(
    f"{line}: {args.steps} steps/fit, median ratio wall {statistics.median(wall_ratios):.3f}, "
    f"cpu {statistics.median(cpu_ratios):.3f} (target <= 1.02); {lines} events written"
)
step_us = min(bare_walls) / args.steps * 1e6
extra = hook_cost_us()
print(f"hook cost per batch: {extra:.1f} us = {extra / step_us:.2%} of a bare step ({step_us:.0f} us)")
