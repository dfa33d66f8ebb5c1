"""Benchmark: `trainmedic.data.check` vs deepchecks' data_integrity + train_test_validation.

Same data, side by side in one run, each tool in its own fresh process (so peak
RSS is its own): seconds of the check itself (reading the files and importing
excluded) and its peak RSS. VmHWM is reset after the data is loaded, so the CSV
reader's own peak does not count; `(peak-base)/data` is that peak minus the RSS
before the data was read, over the in-memory size of the data (1.0x would be
nothing but the data itself). N rows x 20 mixed columns (12 float, 4
int, 4 text) + a binary label, split 80/10/10 into train/val/test, with a few
planted problems (duplicates, overlap, missing values) so every check has work.

deepchecks 0.19.1 needs old pins (setuptools<70, scikit-learn 1.6, pandas 2.2,
numpy 1.26): this script creates benchmarks/.peers-venv for it on first use.
trainmedic checks train/val/test (3 splits); deepchecks' suites take two
datasets, so data_integrity runs on train and train_test_validation on
train vs test.

    python benchmarks/data_check.py --rows 100000 1000000
    python benchmarks/data_check.py --rows 100000 --skip-deepchecks
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
PEERS = HERE / ".peers-venv"
PEER_PINS = ["deepchecks==0.19.1", "setuptools<70", "scikit-learn==1.6.1", "pandas==2.2.3", "numpy==1.26.4"]
TEXT = [f"t{i}" for i in range(4)]

CHILD_COMMON = r"""
import json, sys, time
def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
def peak_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
def reset_peak():
    # Linux >= 4.0: writing 5 resets VmHWM, so the peak is the check's, not the CSV reader's
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")
"""

TRAINMEDIC_CHILD = (
    CHILD_COMMON
    + r"""
import pandas as pd
import trainmedic.data, trainmedic.data.noise, trainmedic.data._parity  # imports before the clock
import sklearn.ensemble, scipy.stats
folder, noise = sys.argv[1], sys.argv[2] == "1"
base = rss_mb()
frames = [pd.read_csv(f"{folder}/{n}.csv") for n in ("train", "val", "test")]
data_mb = sum(f.memory_usage(deep=True).sum() for f in frames) / 2**20
loaded = rss_mb()
reset_peak()
cpu = time.process_time()
start = time.perf_counter()
findings = trainmedic.data.check(*frames, label="y", label_noise=noise)
seconds = time.perf_counter() - start
cpu = time.process_time() - cpu
print(json.dumps({"seconds": seconds, "cpu_seconds": cpu,
                  "peak_mb": peak_mb(), "base_mb": base, "loaded_mb": loaded,
                  "data_mb": data_mb, "findings": sorted({f.code for f in findings})}))
"""
)

DEEPCHECKS_CHILD = (
    CHILD_COMMON
    + r"""
import warnings; warnings.filterwarnings("ignore")
import pandas as pd
from deepchecks.tabular import Dataset
from deepchecks.tabular.suites import data_integrity, train_test_validation
folder = sys.argv[1]
base = rss_mb()
train, test = (pd.read_csv(f"{folder}/{n}.csv") for n in ("train", "test"))
data_mb = sum(f.memory_usage(deep=True).sum() for f in (train, test)) / 2**20
loaded = rss_mb()
reset_peak()
cats = [c for c in train.columns if c.startswith("t")]
cpu = time.process_time()
start = time.perf_counter()
tr = Dataset(train, label="y", cat_features=cats)
te = Dataset(test, label="y", cat_features=cats)
integrity = data_integrity().run(tr)
middle = time.perf_counter()
validation = train_test_validation().run(train_dataset=tr, test_dataset=te)
seconds = time.perf_counter() - start
cpu = time.process_time() - cpu
print(json.dumps({"seconds": seconds, "cpu_seconds": cpu,
                  "integrity_seconds": middle - start, "peak_mb": peak_mb(),
                  "base_mb": base, "loaded_mb": loaded, "data_mb": data_mb}))
"""
)


def make_data(rows: int, folder: Path, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({f"f{i}": rng.normal(size=rows) for i in range(12)})
    for i in range(4):
        frame[f"i{i}"] = rng.integers(0, 10_000, size=rows)
    for i, name in enumerate(TEXT):
        frame[name] = rng.choice([f"level_{k}" for k in range(5 + 10 * i)], size=rows)
    frame["y"] = ((frame["f0"] + 0.5 * frame["f1"] + rng.normal(scale=0.5, size=rows)) > 0).astype(int)
    frame.loc[rng.random(rows) < 0.05, "f3"] = np.nan  # missing values
    dup = rng.choice(rows, size=rows // 100, replace=False)
    frame.iloc[dup[: len(dup) // 2]] = frame.iloc[dup[len(dup) // 2 :]].to_numpy()  # duplicates / overlap
    order = rng.permutation(rows)
    cut1, cut2 = int(rows * 0.8), int(rows * 0.9)
    folder.mkdir(parents=True, exist_ok=True)
    for name, part in (("train", order[:cut1]), ("val", order[cut1:cut2]), ("test", order[cut2:])):
        frame.iloc[part].to_csv(folder / f"{name}.csv", index=False)


def ensure_peers() -> Path:
    python = PEERS / "bin" / "python"
    if not python.exists():
        print(f"creating {PEERS} for deepchecks (once) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(PEERS)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *PEER_PINS], check=True)
    return python


def run_child(python: str, code: str, *args: str) -> dict[str, object]:
    result = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"child failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000])
    parser.add_argument("--skip-deepchecks", action="store_true")
    args = parser.parse_args()
    peers = None if args.skip_deepchecks else str(ensure_peers())
    results = []
    for rows in args.rows:
        with tempfile.TemporaryDirectory(prefix="tm-bench-") as tmp:
            t0 = time.perf_counter()
            make_data(rows, Path(tmp))
            print(
                f"\n{rows:,} rows (train/val/test 80/10/10), data written in {time.perf_counter() - t0:.0f} s"
            )
            runs = {
                "trainmedic (full)": run_child(sys.executable, TRAINMEDIC_CHILD, tmp, "1"),
                "trainmedic (no label noise)": run_child(sys.executable, TRAINMEDIC_CHILD, tmp, "0"),
            }
            if peers:
                runs["deepchecks integrity+train_test"] = run_child(peers, DEEPCHECKS_CHILD, tmp)
            report(rows, runs)
            results.append({"rows": rows, "runs": runs})
    (HERE / "data_check.last.json").write_text(json.dumps(results, indent=2))


def report(rows: int, runs: dict[str, dict[str, object]]) -> None:
    peer = runs.get("deepchecks integrity+train_test")
    print(
        f"{'tool':34} {'seconds':>8} {'x faster':>9} {'CPU s':>8} {'peak MB':>8} {'data MB':>8} "
        f"{'(peak-base)/data':>17}"
    )
    for name, r in runs.items():
        keys = ("seconds", "cpu_seconds", "peak_mb", "base_mb", "data_mb")
        seconds, cpu, peak, base, data = (float(r[k]) for k in keys)  # type: ignore[arg-type]
        ratio = f"{float(peer['seconds']) / seconds:8.1f}x" if peer else "        -"  # type: ignore[arg-type]
        print(
            f"{name:34} {seconds:8.2f} {ratio:>9} {cpu:8.2f} {peak:8.0f} {data:8.0f} "
            f"{(peak - base) / data:16.2f}x"
        )
        if "findings" in r:
            print(f"{'':34} findings: {', '.join(r['findings'])}")  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
