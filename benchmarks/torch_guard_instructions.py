"""The PyTorch guard's cost per step in CPU instructions, counted by callgrind: no clock involved.

A shared or throttled machine moves wall-clock ratios by more than the guard costs
(torch_guard_blocks.py needs an idle machine). Instructions do not depend on the load: the same
small MLP trains in two processes under `valgrind --tool=callgrind`, one bare (the guard's hooks
uninstalled) and one guarded, and only the measured steps are counted (they run inside one
`functools.reduce` call, callgrind's `--toggle-collect`). Both see the same batches, so the
difference is the guard's own work: its hooks on every step, the losses it keeps, and
its sampled checks (the rate is fixed at one check per `--every` steps, the widest the adaptive
rate reaches on this model). Instructions are not time (a cache miss costs more than an add),
so this is a floor for the wall-clock cost, a reproducible one.

`--cache-sim` adds callgrind's simulated caches (its model of the first-level
instruction and data caches and the last-level cache, with this machine's sizes):
the misses per step, bare and guarded. On a step this short, mostly Python and
PyTorch's dispatch of small ops, a miss in the first-level caches costs several
instructions' time: the misses the guard adds are where its wall-clock cost goes
beyond its instructions.

    python benchmarks/torch_guard_instructions.py [--steps 1000] [--every 100] [--clip 1.0] [--cache-sim]
    python benchmarks/torch_guard_instructions.py --steps 300 --out-dir /tmp/cg   # keep callgrind's files

`--out-dir DIR` keeps callgrind's files (DIR/bare.out, DIR/guarded.out): `callgrind_annotate
--inclusive=yes DIR/guarded.out` then says which functions the guard's instructions go to.

Needs valgrind on PATH; each process takes a few minutes.
"""

import argparse
import concurrent.futures
import functools
import os
import re
import subprocess
import sys
import tempfile


def child(mode: str, steps: int, every: int, clip: float | None) -> None:
    """Train; count instructions only inside the reduce() that runs the measured steps."""
    from torch.utils.data import DataLoader, TensorDataset

    import torch
    import trainmedic.torch as tm
    from torch import nn
    from trainmedic.torch import _patches

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    x, y = torch.randn(64_000, 32), torch.randint(0, 10, (64_000,))

    def batches():
        while True:
            yield from DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)

    stream = batches()
    guard = tm.guard(model, optimizer)
    monitor = guard.monitor

    def step(acc: int, _: int) -> int:
        xb, yb = next(stream)
        optimizer.zero_grad()
        loss_fn(model(xb), yb).backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        return acc

    for _ in range(200):  # warm-up, guarded in both: first-call paths, the first checks
        step(0, 0)
    monitor.every, monitor.adaptive = every, False
    while monitor.step % every:
        step(0, 0)
    if mode == "bare":
        _patches.uninstall()
    subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], capture_output=True, check=False)
    functools.reduce(step, range(steps), 0)


# callgrind's events with --cache-sim=yes, in the order of its "Collected :" line.
CACHE_EVENTS = ("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")


def count(mode: str, args: argparse.Namespace) -> dict[str, int]:
    """The measured steps' events in one process: instructions ("Ir"), and misses with --cache-sim."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(args.out_dir, f"{mode}.out") if args.out_dir else f"{tmp}/out"
        command = [
            "valgrind",
            "--tool=callgrind",
            f"--cache-sim={'yes' if args.cache_sim else 'no'}",
            "--instr-atstart=no",
            "--collect-atstart=no",
            "--toggle-collect=functools_reduce",
            f"--callgrind-out-file={out}",
            sys.executable,
            __file__,
            "--child",
            mode,
            "--steps",
            str(args.steps),
            "--every",
            str(args.every),
        ] + (["--clip", str(args.clip)] if args.clip is not None else [])
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        found = re.search(r"Collected : ([\d ]+)", done.stderr)
        if found is None:
            raise SystemExit(f"callgrind gave no count for {mode}:\n{done.stderr[-2000:]}")
        return dict(zip(CACHE_EVENTS, map(int, found.group(1).split()), strict=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000, help="measured steps per process")
    parser.add_argument(
        "--every", type=int, default=100, help="steps between sampled checks (the widest rate)"
    )
    parser.add_argument(
        "--clip", type=float, default=None, help="clip_grad_norm_ to this max norm every step"
    )
    parser.add_argument("--cache-sim", action="store_true", help="also count simulated cache misses (slower)")
    parser.add_argument("--out-dir", help="keep callgrind's output files here (bare.out, guarded.out)")
    parser.add_argument("--child", choices=["bare", "guarded"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.steps, args.every, args.clip)
        return
    with concurrent.futures.ThreadPoolExecutor(2) as pool:  # the two processes run side by side
        bare_events, guarded_events = pool.map(lambda mode: count(mode, args), ["bare", "guarded"])
    bare, guarded = bare_events["Ir"], guarded_events["Ir"]
    print(
        f"small MLP, CPU, 1 thread, {args.steps} steps, a check every {args.every}"
        + (f", clip_grad_norm_({args.clip}) every step" if args.clip is not None else "")
    )
    print(f"bare    {bare / args.steps:12,.0f} instructions/step")
    print(f"guarded {guarded / args.steps:12,.0f} instructions/step")
    print(
        f"guard   {(guarded - bare) / args.steps:+12,.0f} instructions/step: "
        f"{guarded / bare - 1:+.2%} (target <= +2 %)"
    )
    if args.cache_sim:
        for event, what in (("I1mr", "instruction"), ("D1mr", "data read"), ("D1mw", "data write")):
            before, after = bare_events[event] / args.steps, guarded_events[event] / args.steps
            print(
                f"first-level {what} cache misses/step (simulated): bare {before:,.0f}, guarded "
                f"{after:,.0f}, {after - before:+,.0f} ({after / before - 1:+.2%})"
            )


if __name__ == "__main__":
    main()
