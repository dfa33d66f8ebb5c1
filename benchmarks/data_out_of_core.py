"""Peak memory and time of `trainmedic check data --engine auto` on a table larger than memory.

    nice -n 19 python benchmarks/data_out_of_core.py --rows 50000000 --dir /tmp/trainmedic-ooc

Writes a Parquet dataset of `--rows` rows x 20 columns (train 80 %, val 20 %, one file per
million rows, pyarrow, never the whole table in memory): 14 float features, 3 integer
features, 2 categorical text features and a 0/1 label. Then runs the CLI as a subprocess
with `--memory-budget 2GiB` (auto picks DuckDB for the big table) and, beside it, the pandas
engine on a 1,000,000-row table of the same kind, sampling the resident memory of the whole
process tree (psutil, every 0.1 s). Prints one line per run and writes results.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq

CHUNK = 1_000_000
FLOATS, INTS = 14, 3
CITIES = pa.array(["paris", "lyon", "nice", "lille", "brest", "metz", "caen", "pau"])
KINDS = pa.array(["a", "b", "c"])
BYTES_PER_ROW = 8 * (FLOATS + INTS + 1) + 2  # as written (random doubles do not compress)


def chunk(rows: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    columns = {f"x{i}": rng.normal(size=rows) for i in range(FLOATS)}
    columns.update({f"n{i}": rng.integers(0, 1_000_000, size=rows) for i in range(INTS)})
    city = pa.DictionaryArray.from_arrays(
        pa.array(rng.integers(0, len(CITIES), size=rows, dtype=np.int32)), CITIES
    )
    kind_codes = rng.integers(0, len(KINDS), size=rows, dtype=np.int32)
    kind = pa.DictionaryArray.from_arrays(pa.array(kind_codes), KINDS)
    label = ((columns["x0"] + columns["x1"] > 0) ^ (kind_codes == 2)).astype(np.int64)
    table = pa.table({**columns, "city": city, "kind": kind, "y": label})
    return table.cast(
        pa.schema(
            [f if f.name not in ("city", "kind") else pa.field(f.name, pa.string()) for f in table.schema]
        )
    )


def write_split(folder: Path, rows: int, seed: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for part, start in enumerate(range(0, rows, CHUNK)):
        pq.write_table(
            chunk(min(CHUNK, rows - start), seed * 100_000 + part), folder / f"part-{part:05d}.parquet"
        )


def write_dataset(root: Path, rows: int) -> tuple[Path, Path]:
    train, val = root / "train", root / "val"
    if (root / "rows.txt").exists() and (root / "rows.txt").read_text() == str(rows):
        return train, val  # written by an earlier run
    shutil.rmtree(root, ignore_errors=True)
    write_split(train, rows * 4 // 5, seed=1)
    write_split(val, rows - rows * 4 // 5, seed=2)
    (root / "rows.txt").write_text(str(rows))
    return train, val


def measure(command: list[str]) -> dict[str, object]:
    """Wall time and peak resident memory of the process tree (sampled every 0.1 s)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    root = psutil.Process(process.pid)
    peak = 0
    while process.poll() is None:
        try:
            tree = [root, *root.children(recursive=True)]
            peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
        except psutil.Error:
            pass
        time.sleep(0.1)
    out, err = process.communicate()
    wall = time.perf_counter() - start
    codes, notes = [], []
    if out.strip().startswith("{"):
        document = json.loads(out)
        codes = sorted({f["code"] for f in document["findings"]})
        notes = document["summary"]["notes"]
    return {
        "command": " ".join(command),
        "exit": process.returncode,
        "wall_s": round(wall, 1),
        "peak_rss_mib": round(peak / 2**20),
        "codes": codes,
        "notes": notes,
        "stderr_tail": err.strip().splitlines()[-3:],
    }


def check_command(train: Path, val: Path, engine: str, budget: str | None) -> list[str]:
    if engine == "pandas":
        train, val = _one_file(train), _one_file(val)  # the pandas engine reads files, not folders
    command = [sys.executable, "-m", "trainmedic", "check", "data", str(train), "--val", str(val)]
    command += ["--label", "y", "--engine", engine, "--format", "json"]
    return command + (["--memory-budget", budget] if budget else [])


def _one_file(folder: Path) -> Path:
    files = sorted(folder.glob("*.parquet"))
    return files[0] if len(files) == 1 else folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000_000)
    parser.add_argument("--pandas-rows", type=int, default=1_000_000)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/trainmedic-ooc"))
    parser.add_argument("--budget", default="2GiB")
    args = parser.parse_args()
    needed = (args.rows + args.pandas_rows) * BYTES_PER_ROW
    free = shutil.disk_usage(args.dir.parent if not args.dir.exists() else args.dir).free
    if needed > 0.9 * free:
        sys.exit(f"{args.dir}: needs ~{needed / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free; use --rows")
    results = []
    train, val = write_dataset(args.dir / f"rows-{args.rows}", args.rows)
    results.append({"rows": args.rows, **measure(check_command(train, val, "auto", args.budget))})
    print(json.dumps(results[-1]), flush=True)
    train, val = write_dataset(args.dir / f"rows-{args.pandas_rows}", args.pandas_rows)
    results.append({"rows": args.pandas_rows, **measure(check_command(train, val, "pandas", None))})
    print(json.dumps(results[-1]), flush=True)
    (args.dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
