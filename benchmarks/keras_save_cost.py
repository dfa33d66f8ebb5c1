"""What the Keras save checks (`trainmedic.keras._saves`) cost the training process: the save
call's time with the checks and bare, interleaved, the training step right after it, and the
worker's time per check.

A Keras 3 MLP (TensorFlow backend) of `--width` units per hidden layer (3 hidden layers: about
`3 * width**2` float32 weights), compiled with Adam and fitted one epoch on arrays, is saved
`--rounds` times each way with `Model.save(path.keras)` and `Model.save_weights(path.weights.h5)`,
checked (the wrapper trainmedic installs) and bare (the original method, `__wrapped__`),
alternating, each into a fresh path. "checked / bare" is the median save call's wall time with
the checks over without (what the training loop waits for: the wrapper and the copy of the
model's variables), and the same in CPU time of the calling thread (which a loaded machine's
scheduling does not inflate). After each save one training step (`train_on_batch` on 32 rows)
is timed: the probe runs in a thread of the process meanwhile. The worker reloads and measures
in its own process; its time per check is read from its files (job written to result written).
The load average is printed before and after.

    python benchmarks/keras_save_cost.py --rounds 6
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def timed(call: Callable[[], Any], cpu: list[float]) -> float:
    start, start_cpu = time.perf_counter(), time.thread_time()
    call()
    cpu.append(time.thread_time() - start_cpu)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--width", type=int, default=1024)
    args = parser.parse_args()
    if args.rounds > 8:
        parser.error("--rounds 8 at most: 2 saves a round, 16 checks a process")

    import numpy as np

    import keras
    from trainmedic.keras import _auto, _saves
    from trainmedic.keras import _save_results as save_results

    _auto.install(keras, sink=lambda event: None)  # fit keeps its first rows; saves wrapped
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 64)).astype("float32")
    y = rng.normal(size=(256, 1)).astype("float32")
    hidden = [keras.layers.Dense(args.width, activation="relu") for _ in range(3)]
    model = keras.Sequential([keras.Input((64,)), *hidden, keras.layers.Dense(1)])
    model.compile(keras.optimizers.Adam(1e-5), "mse")
    model.fit(x, y, batch_size=32, epochs=1, verbose=0)
    mb = sum(w.size * 4 for w in model.get_weights()) / 2**20
    saves = {
        "Model.save (.keras)": ("save", ".keras"),
        "Model.save_weights (.weights.h5)": ("save_weights", ".weights.h5"),
    }
    backend = keras.backend.backend()
    print(f"Keras {keras.__version__} ({backend}), MLP of {mb:.0f} MB, load average {os.getloadavg()}")
    out = Path(tempfile.mkdtemp(prefix="keras-save-cost-"))
    rows: dict[str, dict[str, list[float]]] = {}
    count = 0
    for _ in range(args.rounds):
        for label, (method, suffix) in saves.items():
            checked = getattr(type(model), method)
            for variant, call in (("checked", checked), ("bare", checked.__wrapped__)):
                count += 1
                path = out / f"{count:03d}{suffix}"
                row = rows.setdefault(
                    f"{label} {variant}", {"wall": [], "cpu": [], "step": [], "step_cpu": []}
                )
                row["wall"].append(timed(lambda: call(model, path), row["cpu"]))  # noqa: B023
                row["step"].append(timed(lambda: model.train_on_batch(x[:32], y[:32]), row["step_cpu"]))
    jobs = list(_saves._state.jobs)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not all((j.scratch / "result.json").exists() for j in jobs):
        _saves._pump()
        time.sleep(0.2)
    spans = [
        (job.scratch / "result.json").stat().st_mtime - (job.scratch / "job.claimed.json").stat().st_mtime
        for job in jobs
        if (job.scratch / "result.json").exists() and (job.scratch / "job.claimed.json").exists()
    ]
    judged = sum(
        1 for job in jobs if save_results.observations(job.saved, job.path, job.where, job.result() or {})
    )
    _saves.finish()
    print(f"load average after {os.getloadavg()}")
    print("| save | bare ms | bare CPU ms | checked / bare | CPU checked / bare | next step checked / bare |")
    print("|---|---|---|---|---|---|")
    for label in saves:
        checked, bare = rows[f"{label} checked"], rows[f"{label} bare"]

        def ratio(key: str) -> float:
            return statistics.median(checked[key]) / statistics.median(bare[key])  # noqa: B023

        print(
            f"| {label} | {1000 * statistics.median(bare['wall']):.0f} | "
            f"{1000 * statistics.median(bare['cpu']):.0f} | {ratio('wall'):.2f} | "
            f"{ratio('cpu'):.2f} | {ratio('step'):.2f} |"
        )
    if spans:
        print(
            f"worker: {len(spans)} checks, {judged} with a finding, median {statistics.median(spans):.2f} s "
            f"from the job written to its result (max {max(spans):.2f} s)"
        )


if __name__ == "__main__":
    main()
