"""What the PyTorch guard costs per step: bare loop vs guarded loop vs Lightning Trainer.

A small MLP trains for 2,000 steps from an in-memory DataLoader, on CPU, one
thread. The variants run interleaved, round after round (their order rotated each
round, as a run placed later in a round measured up to a few % slower), so a
busy machine slows all of them alike; the table reports each variant's median CPU time per
step (process time: on a shared machine, time spent descheduled is not the
variant's cost), its median ratio to the bare loop within the same round, and
the ratio of each variant's fastest round to the bare loop's fastest (noise on a
shared machine only ever adds time, so the fastest rounds are the least
disturbed: the estimator `timeit` uses).

    python benchmarks/torch_guard_overhead.py [--steps 2000] [--rounds 7] [--no-lightning] [--clip 1.0]

`--no-lightning` runs the bare and guarded loops only: more rounds in the same
time, for a steadier ratio on a busy machine. `--clip MAX_NORM` clips the gradient
norm before every update in every variant (`clip_grad_norm_` in the loops,
`gradient_clip_val` in Lightning), so the guard also keeps the pre-clip norms.

On an ordinary step the guard stores references and counters only (the loss
tensor, step counters, the data-loader wait): no tensor op; every 10th step it
also notes where a loss window ends (a timestamp). Every 10 steps it reads the
kept losses and the gradient norms in one batch, and looks at the loss inputs
(tests/torch/test_guard_sampling.py checks the no-op contract); on this CPU-only
MLP, whose steps are not much longer than such a check, it widens the checks to
every 30-50 steps after the first 100 to keep them under 0.5 % of the step time
(the `sampling` observation says so); the loss curve still has a point, the
window's mean, every 10 steps.
"""

import argparse
import functools
import statistics
import time

from torch.utils.data import DataLoader, TensorDataset

import torch
import trainmedic.torch as tm
from torch import nn


def make(steps, batch=64):
    torch.manual_seed(0)
    x = torch.randn(steps * batch, 32)
    y = torch.randint(0, 10, (steps * batch,))
    loader = DataLoader(TensorDataset(x, y), batch_size=batch, shuffle=True)
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
    return loader, model


CLIP = None  # --clip: max norm for clip_grad_norm_ before every update


def loop(steps, guard=False, module=tm):
    loader, model = make(steps)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    g = module.guard(model, optimizer) if guard else None
    start = time.process_time()
    for x, y in loader:
        optimizer.zero_grad()
        loss_fn(model(x), y).backward()
        if CLIP is not None:
            nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        optimizer.step()
    elapsed = time.process_time() - start
    if g is not None:
        g.stop()
    return elapsed / steps


def lightning(steps, guard=False):
    import lightning as L

    class Module(L.LightningModule):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def training_step(self, batch, batch_idx):
            x, y = batch
            return nn.functional.cross_entropy(self.model(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    from trainmedic.lightning import Guard

    loader, model = make(steps)
    trainer = L.Trainer(
        max_epochs=1,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[Guard()] if guard else [],
        gradient_clip_val=CLIP,
    )
    start = time.process_time()
    trainer.fit(Module(model), loader)
    return (time.process_time() - start) / steps


VARIANTS = {
    "bare loop": loop,
    "guarded loop": functools.partial(loop, guard=True),
    "Lightning Trainer": lightning,
    "Lightning + Guard": functools.partial(lightning, guard=True),
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--no-lightning", action="store_true", help="bare and guarded loops only")
    parser.add_argument("--clip", type=float, default=None, help="clip the gradient norm to this every step")
    args = parser.parse_args()
    global CLIP  # a setting of the whole benchmark, read by every variant
    CLIP = args.clip
    variants = {k: v for k, v in VARIANTS.items() if not (args.no_lightning and "Lightning" in k)}
    torch.set_num_threads(1)
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.ERROR)
    for fn in variants.values():  # warm-up: imports, allocator, first-call paths
        fn(200)
    per_step = {name: [] for name in variants}
    ratios = {name: [] for name in variants}
    names = list(variants)
    for round_index in range(args.rounds):
        # Rotate the order each round: whatever runs first in a round is not always the bare loop.
        shift = round_index % len(names)
        times = {name: variants[name](args.steps) for name in names[shift:] + names[:shift]}
        for name, value in times.items():
            per_step[name].append(value)
            ratios[name].append(value / times["bare loop"])
    print(
        f"small MLP, {args.steps} steps x {args.rounds} rounds, CPU, 1 thread; guard: a loss point every "
        "10 steps, its checks widened after the first 100 to stay under 0.5 % of the step time"
        + (f"; gradient norm clipped to {CLIP} every step" if CLIP is not None else "")
    )
    header = f"{'variant':<20} {'median CPU us/step':>19} {'median ratio vs bare':>22}"
    print(f"{header} {'ratio of fastest rounds':>24}")
    for name in variants:
        cpu_us = statistics.median(per_step[name]) * 1e6
        fastest = min(per_step[name]) / min(per_step["bare loop"])
        print(f"{name:<20} {cpu_us:>19.1f} {statistics.median(ratios[name]):>22.3f} {fastest:>24.3f}")
    if args.no_lightning:
        return
    guard_vs_lightning = [
        g / b for g, b in zip(per_step["Lightning + Guard"], per_step["Lightning Trainer"], strict=True)
    ]
    in_lightning = statistics.median(guard_vs_lightning)
    print(f"{'guard in Lightning':<20} {'':>19} {in_lightning:>22.3f}  (vs Lightning alone)")


if __name__ == "__main__":
    main()
