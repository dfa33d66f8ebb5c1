"""Two versions of the PyTorch guard against the bare loop, interleaved in one process.

On a shared machine whole-run ratios swing by ±10 % from round to round; running
the bare loop, a reference guard and this checkout's guard in the same process,
round after round with their order rotated, lets them share the machine's state.
The reference is another checkout's `src/trainmedic` (e.g. `git worktree add
/tmp/ref main`), copied and imported as `trainmedic_ref`.

    python benchmarks/torch_guard_ab.py /tmp/ref/src/trainmedic [--rounds 9] [--steps 2000] [--clip 1.0]

`--clip MAX_NORM` clips the gradient norm before every update (as torch_guard_overhead.py).
"""

import argparse
import functools
import importlib
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import torch_guard_overhead
from torch_guard_overhead import loop

import torch
import trainmedic.torch as tm


def import_reference(src: Path, into: Path):
    """The reference package under another name, so both guards load side by side."""
    target = into / "trainmedic_ref"
    shutil.copytree(src, target)
    pattern = re.compile(r"\b(from|import) trainmedic\b")
    for path in target.rglob("*.py"):
        path.write_text(pattern.sub(r"\1 trainmedic_ref", path.read_text()))
    sys.path.insert(0, str(into))
    return importlib.import_module("trainmedic_ref.torch")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("reference", type=Path, help="another checkout's src/trainmedic")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--clip", type=float, default=None, help="clip the gradient norm to this every step")
    args = parser.parse_args()
    torch_guard_overhead.CLIP = args.clip
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        ref = import_reference(args.reference, Path(tmp))
        variants = {
            "bare loop": loop,
            "reference guard": functools.partial(loop, guard=True, module=ref),
            "this guard": functools.partial(loop, guard=True, module=tm),
        }
        for fn in variants.values():
            fn(200)
        names = list(variants)
        per_step = {name: [] for name in names}
        ratios = {name: [] for name in names}
        for round_index in range(args.rounds):
            shift = round_index % len(names)
            times = {name: variants[name](args.steps) for name in names[shift:] + names[:shift]}
            for name in names:
                per_step[name].append(times[name])
                ratios[name].append(times[name] / times["bare loop"])
    bare = statistics.median(per_step["bare loop"])
    clipped = f", clip_grad_norm_({args.clip}) every step" if args.clip is not None else ""
    print(f"small MLP, {args.steps} steps x {args.rounds} rounds, CPU, 1 thread, one process{clipped}")
    header = f"{'variant':<16} {'median CPU us/step':>19} {'vs bare':>9} {'median ratio':>13}"
    print(f"{header} {'ratio range':>14}")
    for name in names:
        median = statistics.median(per_step[name])
        low, high = min(ratios[name]), max(ratios[name])
        print(
            f"{name:<16} {median * 1e6:>19.1f} {(median - bare) * 1e6:>+9.1f} "
            f"{statistics.median(ratios[name]):>13.3f} {low:>6.3f}-{high:.3f}"
        )


if __name__ == "__main__":
    main()
