"""The PyTorch guard's cost per step: a bare and a guarded training process, in alternating blocks.

Whole-run ratios (torch_guard_overhead.py) on a shared, throttled machine swing
by ±5 % from one round to the next, more than the cost being measured. Here two
processes train the same small MLP on the same batches, one bare and one under
`trainmedic.torch.guard` (its adaptive sampling as in any run), and take turns on
one CPU: a block of steps in one, then a block in the other, and so on. Each
guarded block is compared with the bare blocks on either side of it, a fraction
of a second away, so the drift of the machine cancels; the median of these
ratios is the cost.

Neither process ever installs or removes a hook between blocks: swapping the
patched functions in and out of one process makes Python's specialising
interpreter re-learn their call sites after every swap, a cost of the
measurement, not of the guard. Taking turns on one CPU, each block starts with
the other process's data in the caches, bare and guarded alike.

    python benchmarks/torch_guard_blocks.py [--pairs 400] [--block 100] [--clip 1.0] [--cpu 1]
    python benchmarks/torch_guard_blocks.py --control   # both processes bare: the method's zero
    python benchmarks/torch_guard_blocks.py --empty-hooks   # four pass-through hooks, no guard
    python benchmarks/torch_guard_blocks.py --features 784 --hidden 512   # a wider MLP, longer steps

`--clip MAX_NORM` adds `clip_grad_norm_(model.parameters(), MAX_NORM)` before every
update, in both processes: the guard then also keeps each step's pre-clip norm
and reads it with the losses at its checks.
"""

import argparse
import multiprocessing as mp
import os
import statistics
import time
from multiprocessing.connection import Connection


def batches(features: int, batch: int = 64, size: int = 64_000):
    """An endless stream of shuffled batches (a new epoch when one ends, as a real loop does)."""
    from torch.utils.data import DataLoader, TensorDataset

    import torch

    torch.manual_seed(0)
    x = torch.randn(size, features)
    y = torch.randint(0, 10, (size,))
    loader = DataLoader(TensorDataset(x, y), batch_size=batch, shuffle=True)
    while True:
        yield from loader


def install_empty_hooks() -> None:
    """Four pass-through Python calls a step, where the guard has its four: what the calls alone cost."""
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
    from torch.utils.data.dataloader import _BaseDataLoaderIter

    import torch

    def step_hook(optimizer: object, args: object, kwargs: object) -> None:
        return None

    register_optimizer_step_pre_hook(step_hook)
    register_optimizer_step_post_hook(step_hook)
    backward, next_batch = torch.autograd.backward, _BaseDataLoaderIter.__next__

    def passing_backward(*args: object, **kwargs: object) -> object:
        return backward(*args, **kwargs)

    def passing_next(self: object) -> object:
        return next_batch(self)

    torch.autograd.backward = passing_backward
    _BaseDataLoaderIter.__next__ = passing_next


def trainer(
    second: str, clip: float | None, cpu: int | None, shape: tuple[int, int], orders: Connection
) -> None:
    """Train in blocks when told: each order is a number of steps, each answer CPU seconds per step."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    import torch
    from torch import nn

    torch.set_num_threads(1)
    torch.manual_seed(0)
    features, hidden = shape
    model = nn.Sequential(
        nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 10)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    stream = batches(features)
    guard = None
    if second == "guarded":
        import trainmedic.torch as tm

        guard = tm.guard(model, optimizer)
    elif second == "empty-hooks":
        install_empty_hooks()

    def block(steps: int) -> float:
        start = time.process_time()
        for _ in range(steps):
            x, y = next(stream)
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            if clip is not None:
                nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
        return (time.process_time() - start) / steps

    while (steps := orders.recv()) is not None:
        orders.send(block(steps))
    every = guard.monitor.every if guard is not None else None
    if guard is not None:
        guard.stop()
    orders.send(every)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=400, help="guarded blocks (each between two bare ones)")
    parser.add_argument("--block", type=int, default=100, help="steps per block")
    parser.add_argument("--warmup", type=int, default=1000, help="steps each process trains before timing")
    parser.add_argument(
        "--clip", type=float, default=None, help="clip_grad_norm_ to this max norm every step"
    )
    parser.add_argument(
        "--cpu", type=int, default=None, help="the CPU both processes share (default: the last)"
    )
    parser.add_argument("--features", type=int, default=32, help="input features of the MLP")
    parser.add_argument("--hidden", type=int, default=128, help="width of its two hidden layers")
    parser.add_argument(
        "--control",
        action="store_true",
        help="A/A: the second process trains bare too (the method's own zero)",
    )
    parser.add_argument(
        "--empty-hooks",
        action="store_true",
        help="the second process has four pass-through hooks (optimizer pre and post, backward, "
        "DataLoader __next__) instead of the guard: what four Python calls a step cost",
    )
    args = parser.parse_args()
    cpu = args.cpu if args.cpu is not None else max(os.sched_getaffinity(0))
    second = "bare" if args.control else "empty-hooks" if args.empty_hooks else "guarded"
    context = mp.get_context("spawn")
    ends: dict[str, Connection] = {}
    workers = []
    for mode in ("bare", "guarded"):
        ours, theirs = context.Pipe()
        worker = context.Process(
            target=trainer,
            args=(
                second if mode == "guarded" else "bare",
                args.clip,
                cpu,
                (args.features, args.hidden),
                theirs,
            ),
            daemon=True,
        )
        worker.start()
        ends[mode] = ours
        workers.append(worker)

    def run(mode: str, steps: int) -> float:
        ends[mode].send(steps)
        return float(ends[mode].recv())

    for mode in ends:  # warm-up: first-call paths, the guard's first checks and its widened rate
        run(mode, args.warmup)
    bare = [run("bare", args.block)]
    guarded, ratios = [], []
    for _ in range(args.pairs):
        guarded.append(run("guarded", args.block))
        bare.append(run("bare", args.block))
        ratios.append(guarded[-1] / ((bare[-2] + bare[-1]) / 2))
    for end in ends.values():
        end.send(None)
    every = ends["guarded"].recv()
    ends["bare"].recv()
    for worker in workers:
        worker.join()

    quartiles = statistics.quantiles(ratios, n=4)
    half_width = 1.96 * statistics.stdev(ratios) / len(ratios) ** 0.5
    if args.control:
        print("CONTROL: both processes train bare")
    if args.empty_hooks:
        print("EMPTY HOOKS: the second process has four pass-through hooks, no guard")
    print(
        f"MLP {args.features}-{args.hidden}-{args.hidden}-10, two processes taking turns on CPU {cpu}: "
        f"{args.pairs} guarded blocks of {args.block} steps, each between two bare ones; 1 thread"
        + (f"; clip_grad_norm_({args.clip}) every step" if args.clip is not None else "")
    )
    print(f"bare    {statistics.median(bare) * 1e6:8.1f} us/step (median block)")
    print(f"guarded {statistics.median(guarded) * 1e6:8.1f} us/step (median block)")
    print(
        f"median ratio guarded / neighbouring bare: {statistics.median(ratios):.4f} "
        f"(quartiles {quartiles[0]:.4f}-{quartiles[2]:.4f}); mean {statistics.mean(ratios):.4f} "
        f"± {half_width:.4f} (95 %); ratio of the means: "
        f"{statistics.mean(guarded) / statistics.mean(bare):.4f}  (target <= 1.02)"
    )
    print(f"the guard's sampled checks: every {every} steps at the end")


if __name__ == "__main__":
    main()
