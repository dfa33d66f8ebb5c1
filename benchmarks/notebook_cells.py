"""Per-cell cost of the trainmedic kernel, measured inside one real kernel (target: <= 5 ms).

    python benchmarks/notebook_cells.py

Starts the trainmedic kernelspec (installed into a temporary Jupyter data folder) with
jupyter_client, and in that one kernel executes `pass` as a cell (IPython's `run_cell`, which
fires the same `pre_run_cell` / `post_run_cell` events a notebook's cells fire) under three
settings, interleaved round by round so load on the machine hits all alike:

- bare: trainmedic's cell callbacks unregistered (ipykernel as it is);
- cells: the cell recorder (CellStart / CellEnd events, /proc reads), as every cell pays it;
- inline: the recorder plus `%load_ext trainmedic` (the events file read after the cell).

Cells run with `store_history=False`: IPython's history database write (milliseconds, and
noisy) is the same in every setting and would hide the difference. Printed: the median time
per cell of each setting and the cost over bare. The cost of a
training cell's rule pass is not in this figure: it runs only after a cell that trained.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CELLS_PER_ROUND = 300
ROUNDS = 7

MEASURE = f"""
import json, statistics, time
from trainmedic.notebook import _cells as cells, extension
ip = get_ipython()
rec = cells.recorder()
extension.load(ip)
inline = extension._inline

def hooks(recorder, inline_on):
    for name, cb in (("pre_run_cell", rec.pre_run_cell), ("post_run_cell", rec.post_run_cell),
                     ("pre_run_cell", inline.pre_run_cell), ("post_run_cell", inline.post_run_cell)):
        try:
            ip.events.unregister(name, cb)
        except ValueError:
            pass
    if recorder:
        ip.events.register("pre_run_cell", rec.pre_run_cell)
        ip.events.register("post_run_cell", rec.post_run_cell)
    if inline_on:
        ip.events.register("pre_run_cell", inline.pre_run_cell)
        ip.events.register("post_run_cell", inline.post_run_cell)

settings = {{"bare": (False, False), "cells": (True, False), "inline": (True, True)}}
times = {{k: [] for k in settings}}
for _ in range({ROUNDS}):
    for name, (r, i) in settings.items():
        hooks(r, i)
        t0 = time.perf_counter()
        for _ in range({CELLS_PER_ROUND}):
            ip.run_cell("pass", store_history=False)
        times[name].append((time.perf_counter() - t0) / {CELLS_PER_ROUND})
hooks(True, True)
print("RESULT " + json.dumps({{k: statistics.median(v) for k, v in times.items()}}))
"""


def main() -> None:
    from jupyter_client.manager import start_new_kernel

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["JUPYTER_DATA_DIR"] = str(Path(tmp) / "data")
        subprocess.run(
            [sys.executable, "-m", "trainmedic", "kernel", "install", "--name", "tm-bench"], check=True
        )
        km, kc = start_new_kernel(kernel_name="tm-bench", cwd=tmp)
        lines: list[str] = []
        try:
            kc.execute_interactive(
                MEASURE,
                timeout=600,
                output_hook=lambda m: lines.append(m["content"].get("text", "")),
            )
        finally:
            kc.stop_channels()
            km.shutdown_kernel()
    result = next(line for text in lines for line in text.splitlines() if line.startswith("RESULT "))
    medians = json.loads(result.removeprefix("RESULT "))
    bare = medians["bare"]
    print(f"{CELLS_PER_ROUND} cells x {ROUNDS} rounds, interleaved; median time per `pass` cell:")
    for name, value in medians.items():
        extra = "" if name == "bare" else f"  (+{(value - bare) * 1000:.3f} ms per cell)"
        print(f"  {name:7s} {value * 1000:.3f} ms{extra}")


if __name__ == "__main__":
    main()
