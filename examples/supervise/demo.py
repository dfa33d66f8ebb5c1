"""`make demo`: supervise a real broken run and check that trainmedic says what happened.

The run: a numpy training loop whose epoch-end evaluation needs more memory
every epoch, under a 400 MiB memory limit (a real cgroup, so the kernel's OOM
killer ends it). `trainmedic run` exits 137 like the trainer; the demo exits 0
when the diagnosis is the expected one: oom-killed during evaluation, with the
eval memory spike. Without writable cgroups (not root), it supervises the
crashing example instead.
"""

import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRAINMEDIC = Path(sys.executable).with_name("trainmedic")
NO_CGROUPS = 2


def supervise(name: str, *args: str) -> tuple[int, Path]:
    run_dir = Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-demo-{name}"
    command = [str(TRAINMEDIC), "run", "--out", str(run_dir), *args]
    print("$", " ".join(["trainmedic", *command[1:]]), flush=True)
    return subprocess.call(command), run_dir


def slugs(run_dir: Path) -> dict[str, dict]:
    data = json.loads((run_dir / "findings.json").read_text())
    return {f["slug"]: f for f in data["findings"]}


def main() -> int:
    status, run_dir = supervise(
        "oom", "--memory-limit", "400M", "--", sys.executable, str(HERE / "eval_spike_oom.py")
    )
    if status == NO_CGROUPS:
        print("demo: no writable memory cgroup here (needs root); supervising a crash instead")
        status, run_dir = supervise("crash", "--", sys.executable, str(HERE / "crash.py"))
        found = slugs(run_dir)
        ok = status == 1 and found.get("crashed", {}).get("evidence", {}).get("exception") == "ValueError"
        expected = "crashed with ValueError at crash.py:9"
    else:
        found = slugs(run_dir)
        oom = found.get("oom-killed", {}).get("evidence", {})
        ok = status == 137 and oom.get("phase") == "eval" and "eval-memory-spike" in found
        expected = f"oom-killed during evaluation of epoch {oom.get('epoch')}, with the eval memory spike"
    print()
    print(f"demo: trainmedic run exited {status}, as the trainer did; run folder: {run_dir}")
    if ok:
        print(f"demo: diagnosis as expected: {expected}")
        return 0
    print(f"demo: unexpected diagnosis: {sorted(found)}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
