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

`--hooks` counts each of the guard's per-step hooks alone instead, on a guarded process in a
quiet stretch (the state of most steps), each called `--steps` times in a loop of its own with the
original it wraps replaced by a no-op, beside the same loop calling a no-op with the same
arguments: what the backward wrapper (keeping the loss, its read included), the DataLoader
`__next__` wrapper (the data wait and the batch's step) and the optimizer post-step hook (the
step counted) each add to a step, in instructions.

    python benchmarks/torch_guard_instructions.py --hooks --steps 2000

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


def hooks_child(calls: int) -> None:
    """Each per-step hook alone, `calls` times, each loop in a reduce() of its own (`--hooks`)."""
    from torch.utils.data import DataLoader, TensorDataset

    import torch
    import trainmedic.torch as tm
    from torch import nn
    from trainmedic.torch import _patches
    from trainmedic.torch._batches import LOG_ATTR, BatchLog

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    x, y = torch.randn(6400, 32), torch.randint(0, 10, (6400,))
    guard = tm.guard(model, optimizer)
    monitor = guard.monitor
    loader = iter(DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True))
    for _ in range(60):  # past the first checks, into a quiet stretch
        xb, yb = next(loader)
        optimizer.zero_grad()
        loss_fn(model(xb), yb).backward()
        optimizer.step()
    monitor.every, monitor.adaptive = 10**9, False
    monitor.quiet_until = 10**12  # every call below is an ordinary step's: no window ends, no check
    loss = loss_fn(model(x[:64]), y[:64])

    def nothing(*args: object, **kwargs: object) -> None:
        return None

    class Batches:  # what the DataLoader wrapper is called on: an iterator with its batch log
        pass

    batches = Batches()
    batches.__dict__[LOG_ATTR] = BatchLog(batches, None)
    backward = _patches._backward(nothing)
    next_batch = _patches._loader_next(nothing)
    post = monitor.on_step_post

    def bare_backward(acc: int, _: int) -> int:
        nothing(loss, None, None, False, inputs=None)  # as Tensor.backward calls it
        return acc

    def guarded_backward(acc: int, _: int) -> int:
        backward(loss, None, None, False, inputs=None)
        return acc

    def bare_next(acc: int, _: int) -> int:
        nothing(batches)
        return acc

    def guarded_next(acc: int, _: int) -> int:
        next_batch(batches)
        return acc

    def bare_post(acc: int, _: int) -> int:
        nothing(optimizer, (), {})  # as PyTorch calls its post-step hooks
        return acc

    def guarded_post(acc: int, _: int) -> int:
        post(optimizer, (), {})
        return acc

    subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], capture_output=True, check=False)
    for loop in (bare_backward, guarded_backward, bare_next, guarded_next, bare_post, guarded_post):
        monitor.losses.clear()
        monitor.loss_steps.clear()
        batches.__dict__[LOG_ATTR].clear()
        functools.reduce(loop, range(calls), 0)


HOOKS = ("backward wrapper", "DataLoader __next__ wrapper", "optimizer post-step hook")


def count_hooks(calls: int, out_dir: str | None) -> None:
    """`--hooks`: one callgrind dump per reduce(), in the order of `hooks_child`'s loops (kept as
    OUT_DIR/hooks.out.1 to .6 with `--out-dir`: `callgrind_annotate --inclusive=yes` on .2 shows
    the backward wrapper's `THPVariable_item`)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(out_dir, "hooks.out") if out_dir else f"{tmp}/out"
        command = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            "--collect-atstart=no",
            "--toggle-collect=functools_reduce",
            "--dump-after=functools_reduce",
            f"--callgrind-out-file={out}",
            sys.executable,
            __file__,
            "--child",
            "hooks",
            "--steps",
            str(calls),
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        counts = []
        for part in range(1, 2 * len(HOOKS) + 1):
            try:
                with open(f"{out}.{part}") as dump:
                    found = re.search(r"^(?:summary|totals): (\d+)", dump.read(), re.MULTILINE)
            except OSError:
                found = None
            if found is None:
                raise SystemExit(f"callgrind gave no count for loop {part}:\n{done.stderr[-2000:]}")
            counts.append(int(found.group(1)) / calls)
    print(f"small MLP, CPU, each hook called {calls} times alone, in a quiet stretch")
    for name, bare, guarded in zip(HOOKS, counts[::2], counts[1::2], strict=True):
        print(
            f"{name:<30}{guarded - bare:+8,.0f} instructions a call "
            f"({guarded:,.0f} beside {bare:,.0f} for a no-op)"
        )


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
    parser.add_argument(
        "--hooks", action="store_true", help="count each per-step hook alone (--steps calls each)"
    )
    parser.add_argument("--child", choices=["bare", "guarded", "hooks"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "hooks":
        hooks_child(args.steps)
        return
    if args.child:
        child(args.child, args.steps, args.every, args.clip)
        return
    if args.hooks:
        count_hooks(args.steps, args.out_dir)
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
