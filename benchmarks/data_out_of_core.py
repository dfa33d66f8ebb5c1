"""Peak memory and time of `trainmedic check data --engine auto` on a table larger than memory.

    nice -n 10 python benchmarks/data_out_of_core.py --rows 12000000 --budgets 512MiB,1GiB,2GiB

Writes a Parquet dataset of `--rows` rows x 20 columns (train 80 %, val 20 %, one file per
million rows, pyarrow, never the whole table in memory; kept under `--dir` for later runs):
14 float features, 3 integer features, 2 categorical text features and a 0/1 label. Then
runs the CLI as a subprocess once per `--budgets` entry (`--memory-budget`; auto picks
DuckDB for the big table) and, beside it, the pandas engine on a `--pandas-rows` table of
the same kind (0: none), sampling the resident memory of the whole process tree (psutil,
every 0.1 s) and counting its CPU seconds (steadier than wall seconds on a shared
machine). Prints one line per run and writes results.json; exits 1 when a run failed or
peaked above its budget.
"""

from __future__ import annotations

import argparse
import json
import resource
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
    columns: dict[str, np.ndarray] = {f"x{i}": rng.normal(size=rows) for i in range(FLOATS)}
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
    """Wall time, CPU time and peak resident memory of the process tree (sampled every 0.1 s)."""
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
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
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime
    codes, notes = [], []
    if out.strip().startswith("{"):
        document = json.loads(out)
        codes = sorted({f["code"] for f in document["findings"]})
        notes = document["summary"]["notes"]
    return {
        "command": " ".join(command),
        "exit": process.returncode,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu_s, 1),
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
    parser.add_argument(
        "--budgets", default="512MiB,1GiB,2GiB", help="comma-separated --memory-budget values"
    )
    args = parser.parse_args()
    needed = (args.rows + args.pandas_rows) * BYTES_PER_ROW
    free = shutil.disk_usage(args.dir.parent if not args.dir.exists() else args.dir).free
    if needed > 0.9 * free:
        sys.exit(f"{args.dir}: needs ~{needed / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free; use --rows")
    results = []
    train, val = write_dataset(args.dir / f"rows-{args.rows}", args.rows)
    files = len(list(train.glob("*.parquet"))) + len(list(val.glob("*.parquet")))
    size = sum(f.stat().st_size for f in [*train.glob("*.parquet"), *val.glob("*.parquet")])
    failed = False
    for budget in [b.strip() for b in args.budgets.split(",") if b.strip()]:
        run = measure(check_command(train, val, "auto", budget))
        within = run["exit"] in (0, 1) and int(run["peak_rss_mib"]) * 2**20 <= _bytes(budget)  # type: ignore[call-overload]
        failed = failed or not within
        results.append(
            {
                "rows": args.rows,
                "files": files,
                "parquet_mb": round(size / 1e6),
                "budget": budget,
                "within_budget": within,
                **run,
            }
        )
        print(json.dumps(results[-1]), flush=True)
    if args.pandas_rows:
        train, val = write_dataset(args.dir / f"rows-{args.pandas_rows}", args.pandas_rows)
        results.append({"rows": args.pandas_rows, **measure(check_command(train, val, "pandas", None))})
        print(json.dumps(results[-1]), flush=True)
    (args.dir / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    sys.exit(1 if failed else 0)


def _bytes(size: str) -> int:
    from trainmedic.data.engines import parse_size

    return parse_size(size)


if __name__ == "__main__":
    main()
