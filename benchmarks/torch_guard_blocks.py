"""The PyTorch guard's cost per step: a bare and a guarded training process, in alternating blocks.

Whole-run ratios (torch_guard_overhead.py) on a shared, throttled machine swing
by ±5 % from one round to the next, more than the cost being measured. Here two
processes train the same small MLP on the same batches, one bare and one under
`trainmedic.torch.guard` (its adaptive sampling as in any run), and take turns on
one CPU: a block of steps in one, then a block in the other, and so on. Each
guarded block is compared with the bare blocks on either side of it, a fraction
of a second away, so the drift of the machine cancels; the median of these
ratios is the cost.

`--control` adds a second bare process, measured exactly as the guarded one and
in the same run, its blocks taking turns with the guarded blocks: the method's
zero, side by side with the figure it qualifies. Where one process's memory lands
(the heap's start, the physical pages) shifts its speed by a point or so for its
whole life, so a run's figure carries its processes' layouts; `--processes N`
runs every role in N processes taken in turn and averages N layouts a role, at a
price: with more processes sharing the CPU's caches every block starts colder,
and the ratios rise (the guarded more than the control); longer blocks
(`--block 1000`) make the cold start a smaller share of each block.
`--import-trainmedic` imports `trainmedic.torch` in every process, bare ones
included, so that the import's own shift of the heap is in every role and the
roles differ by the guard's running only.

`--roles` chooses what is measured against the bare blocks, in the same run:
`guarded` (the guard as in any run, its adaptive rate), `every=N` (the guard
with its checks every N steps, given explicitly), `empty-hooks` (four
pass-through Python calls where the guard has at most four: optimizer pre and post
step, backward, DataLoader `__next__`; no guard). A guarded role can switch
parts of the guard off, to measure what they cost by difference:
`/no-losses` (an ordinary step's loss is not kept: the checked steps' losses
only) and `/no-batches` (no batch log: the sampler is not teed and no batch is
noted), as in `every=1000/no-losses/no-batches`. These are ablations for the
measurement only: without them a NaN would not be reported at its own step nor
with its batch. `/alias` keeps every loss (and pre-clip norm) as a detached
alias, as the guard does on an accelerator, instead of reading its value at once
as it does on the CPU: what the read saves, in the same run.

No process ever installs or removes a hook between blocks: swapping the
patched functions in and out of one process makes Python's specialising
interpreter re-learn their call sites after every swap, a cost of the
measurement, not of the guard. Taking turns on one CPU, each block starts with
the other process's data in the caches, bare and guarded alike.

    python benchmarks/torch_guard_blocks.py [--pairs 400] [--block 100] [--clip 1.0] [--cpu 1]
    python benchmarks/torch_guard_blocks.py --control   # bare processes measured beside the guarded ones
    python benchmarks/torch_guard_blocks.py --roles guarded,every=1000,empty-hooks   # side by side
    python benchmarks/torch_guard_blocks.py --processes 3 --block 1000 --import-trainmedic --control
    python benchmarks/torch_guard_blocks.py --features 784 --hidden 512   # a wider MLP, longer steps
    python benchmarks/torch_guard_blocks.py --features 784 --hidden 512 --control --import-trainmedic \
        --processes 6 --block 250 --pairs 480   # PyTorch's quickstart MLP: the <= 2 % target (docs/torch.md)
    python benchmarks/torch_guard_blocks.py --roles every=1000,every=1000/no-losses/no-batches   # by part

`--gc-threshold N` sets Python's collector threshold in every process before the
timing (`1000000` makes collections rare): whether the guard's cost is the collector's,
since what the guard keeps between checks raises the count of live objects.

`--clip MAX_NORM` adds `clip_grad_norm_(model.parameters(), MAX_NORM)` before every
update, in both processes: the guard then also keeps each step's pre-clip norm
and reads it with the losses at its checks.
"""

import argparse
import gc
import multiprocessing as mp
import os
import statistics
import sys
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
    """Four pass-through Python calls a step, where the guard has at most four (three on most
    steps: its pre-step hook is off between the steps that need it): what the calls alone cost."""
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


ABLATIONS = ("no-losses", "no-batches", "alias")


def ablate(parts: list[str]) -> None:
    """Switch parts of the guard off, or keep CPU losses as aliases, before it is made
    (`--roles every=N/no-losses/no-batches`, `guarded/alias`)."""
    from trainmedic.torch import _batches, _patches, _reads

    if "alias" in parts:  # what the guard keeps on an accelerator, on the CPU too
        reading = _reads.kept
        for name, module in list(sys.modules.items()):  # every module that imported it by name
            if name.startswith("trainmedic.torch.") and getattr(module, "kept", None) is reading:
                module.kept = _reads.alias  # type: ignore[attr-defined]
    if "no-batches" in parts:
        _batches.LoaderBatches.start = lambda self, iterator: None  # type: ignore[method-assign]
    if "no-losses" in parts:
        keeping = _patches._backward

        def backward_keeping_nothing(original: object) -> object:
            guarded = keeping(original)

            # The guard's own signature and ordinary call (`_patches._backward`), without the loss.
            def backward(
                tensors: object,
                grad_tensors: object = None,
                retain_graph: object = None,
                create_graph: object = False,
                *args: object,
                inputs: object = None,
                **kwargs: object,
            ) -> object:
                monitor = _patches._active
                if not (args or kwargs) and monitor is not None and monitor.plain_backward:
                    return original(tensors, grad_tensors, retain_graph, create_graph, inputs=inputs)  # type: ignore[operator]
                return guarded(
                    tensors, grad_tensors, retain_graph, create_graph, *args, inputs=inputs, **kwargs
                )

            return backward

        _patches._backward = backward_keeping_nothing


def trainer(
    mode: str,
    clip: float | None,
    cpu: int | None,
    shape: tuple[int, int],
    import_trainmedic: bool,
    gc_threshold: int | None,
    orders: Connection,
) -> None:
    """Train in blocks when told: each order is a number of steps, each answer CPU seconds per step."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    import torch
    from torch import nn

    if import_trainmedic:
        import trainmedic.torch  # noqa: F401  (the same import in every role: see the docstring)

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
    mode, *parts = mode.split("/")
    if mode == "guarded" or mode.startswith("every="):
        import trainmedic.torch as tm

        ablate(parts)
        every = int(mode.removeprefix("every=")) if mode != "guarded" else None
        guard = tm.guard(model, optimizer, every=every)
    elif mode == "empty-hooks":
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

    if gc_threshold is not None:  # every role alike: is the guard's cost Python's collector?
        gc.collect()
        gc.set_threshold(gc_threshold)
    while (steps := orders.recv()) is not None:
        orders.send(block(steps))
    every = guard.monitor.every if guard is not None else None
    if guard is not None:
        guard.stop()
    orders.send(every)


def roles(text: str) -> list[str]:
    """`--roles`: a comma-separated list of guarded, every=N and empty-hooks, each at most once; a
    guarded role may end in /no-losses, /no-batches and /alias."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    for name in names:
        base, *parts = name.split("/")
        every = base.removeprefix("every=")
        explicit = base.startswith("every=") and every.isdigit() and int(every) > 0
        guarded = base == "guarded" or explicit
        if not (guarded or name == "empty-hooks") or any(p not in ABLATIONS for p in parts):
            raise argparse.ArgumentTypeError(
                f"{name!r}: expected guarded, every=N or empty-hooks (a guarded role may end in "
                "/no-losses, /no-batches, /alias)"
            )
    if not names or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"{text!r}: expected distinct roles, at least one")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=400, help="measured blocks (each between two bare ones)")
    parser.add_argument("--block", type=int, default=100, help="steps per block")
    parser.add_argument("--warmup", type=int, default=1000, help="steps each process trains before timing")
    parser.add_argument(
        "--processes", type=int, default=1, help="processes per role, taken in turn (see the docstring)"
    )
    parser.add_argument(
        "--clip", type=float, default=None, help="clip_grad_norm_ to this max norm every step"
    )
    parser.add_argument(
        "--cpu", type=int, default=None, help="the CPU all processes share (default: the last)"
    )
    parser.add_argument("--features", type=int, default=32, help="input features of the MLP")
    parser.add_argument("--hidden", type=int, default=128, help="width of its two hidden layers")
    parser.add_argument(
        "--control",
        action="store_true",
        help="A/A in the same run: bare processes measured like the guarded ones (the method's zero)",
    )
    parser.add_argument(
        "--roles",
        type=roles,
        default=["guarded"],
        help="measured beside the bare blocks, comma separated: guarded (adaptive rate), every=N "
        "(checks every N steps), empty-hooks (four pass-through calls, no guard); a guarded role may "
        "end in /no-losses, /no-batches (parts switched off), /alias (losses kept as tensors)",
    )
    parser.add_argument(
        "--import-trainmedic",
        action="store_true",
        help="import trainmedic.torch in every process, bare ones too (see the docstring)",
    )
    parser.add_argument(
        "--gc-threshold",
        type=int,
        default=None,
        help="gc.set_threshold(N) in every process before timing (1000000: collections made rare)",
    )
    args = parser.parse_args()
    cpu = args.cpu if args.cpu is not None else max(os.sched_getaffinity(0))
    measured = [*args.roles, *(["control"] if args.control else [])]
    context = mp.get_context("spawn")
    ends: dict[str, list[Connection]] = {}
    workers = []
    shape = (args.features, args.hidden)
    for role in ["bare", *measured]:
        ends[role] = []
        mode = "bare" if role == "control" else role
        for _ in range(args.processes):
            ours, theirs = context.Pipe()
            worker = context.Process(
                target=trainer,
                args=(mode, args.clip, cpu, shape, args.import_trainmedic, args.gc_threshold, theirs),
                daemon=True,
            )
            worker.start()
            ends[role].append(ours)
            workers.append(worker)
    turns = dict.fromkeys(ends, 0)

    def run(role: str, steps: int) -> tuple[int, float]:
        """A block in the role's next process: (which process, CPU seconds per step)."""
        index = turns[role] % args.processes
        turns[role] += 1
        ends[role][index].send(steps)
        return index, float(ends[role][index].recv())

    for role_ends in ends.values():  # warm-up: first-call paths, the guard's first checks and rate
        for end in role_ends:
            end.send(args.warmup)
            end.recv()
    bare = [run("bare", args.block)[1]]
    times: dict[str, list[float]] = {role: [] for role in measured}
    by_process: dict[str, list[list[float]]] = {
        role: [[] for _ in range(args.processes)] for role in measured
    }
    for pair in range(args.pairs):
        role = measured[pair % len(measured)]
        index, seconds = run(role, args.block)
        bare.append(run("bare", args.block)[1])
        ratio = seconds / ((bare[-2] + bare[-1]) / 2)
        times[role].append(seconds)
        by_process[role][index].append(ratio)
    everies = []
    for role, role_ends in ends.items():
        for end in role_ends:
            end.send(None)
            every = end.recv()
            if role.split("/")[0] == "guarded":
                everies.append(every)
    for worker in workers:
        worker.join()

    print(
        f"MLP {args.features}-{args.hidden}-{args.hidden}-10, 1 thread, all processes taking turns on CPU "
        f"{cpu}: {args.processes} per role, each measured block of {args.block} steps between two bare "
        "ones" + (f"; clip_grad_norm_({args.clip}) every step" if args.clip is not None else "")
    )
    print(f"{'bare':<12}{statistics.median(bare) * 1e6:8.1f} us/step (median block)")
    for role in measured:
        values = [ratio for process in by_process[role] for ratio in process]
        quartiles = statistics.quantiles(values, n=4)
        half_width = 1.96 * statistics.stdev(values) / len(values) ** 0.5
        per_process = " ".join(f"{statistics.median(r):.4f}" for r in by_process[role] if r)
        print(
            f"{role:<12}{statistics.median(times[role]) * 1e6:8.1f} us/step; median ratio to the "
            f"neighbouring bare blocks {statistics.median(values):.4f} (quartiles {quartiles[0]:.4f}-"
            f"{quartiles[2]:.4f}; mean {statistics.mean(values):.4f} ± {half_width:.4f} (95 %); "
            f"{len(values)} blocks; by process {per_process})"
        )
    if everies:
        print(f"the guard's sampled checks at the end: every {sorted(set(everies))} steps  (target <= 1.02)")


if __name__ == "__main__":
    main()
