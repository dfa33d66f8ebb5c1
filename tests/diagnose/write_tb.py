"""Write TensorBoard event files with a real writer: `python write_tb.py WRITER OUT`.

WRITER is the library users log with: `flax` (flax.metrics.tensorboard.SummaryWriter,
tensor scalars through tf.summary), `clu` (clu.metric_writers.create_default_writer, one
writer per split folder as CLU users lay them out), `tensorboardx` (simple_value scalars),
`torch-new-style` (torch SummaryWriter with new_style=True: tensor scalars). One folder
per scenario under OUT: `healthy`, `nan` (the training loss turns NaN at step 60) and
`overfit` (the held-out loss turns at step 30 while the training loss keeps falling). Runs in
its own process: TensorFlow/JAX stay out of the test process.

The curves are formulas (`curves`), on purpose: this tests the readers of each writer's file
format, where known values must come back exactly. It is never a failure-benchmark case; the
benchmark's TensorBoard cases come from a real training (make_logs.py).
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

STEPS = 100
SCENARIOS = ("healthy", "nan", "overfit")


def curves(scenario: str) -> list[tuple[int, float, float]]:
    """(step, training loss, held-out loss) for every logged step."""
    rows = []
    for step in range(STEPS):
        train = 1.0 / (1.0 + 0.1 * step)
        held_out = 0.6 + 0.4 / (1.0 + 0.1 * step)
        if scenario == "nan" and step >= 60:
            train = math.nan
        if scenario == "overfit":
            held_out = 0.6 + 0.0004 * (step - 30) ** 2
        rows.append((step, train, held_out))
    return rows


def write_flax(rows: list[tuple[int, float, float]], out: Path) -> None:
    from flax.metrics import tensorboard

    writer = tensorboard.SummaryWriter(str(out))  # one folder, as the Flax examples log
    for step, train, held_out in rows:
        writer.scalar("train_loss", train, step)
        writer.scalar("test_loss", held_out, step)
    writer.close()


def write_clu(rows: list[tuple[int, float, float]], out: Path) -> None:
    from clu import metric_writers

    train = metric_writers.create_default_writer(str(out / "train"), asynchronous=False)
    held_out = metric_writers.create_default_writer(str(out / "eval"), asynchronous=False)
    for step, train_loss, eval_loss in rows:
        train.write_scalars(step, {"loss": train_loss})
        held_out.write_scalars(step, {"loss": eval_loss})
    train.close()
    held_out.close()


def write_tensorboardx(rows: list[tuple[int, float, float]], out: Path) -> None:
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(logdir=str(out))
    for step, train, held_out in rows:
        writer.add_scalar("loss/train", train, step)
        writer.add_scalar("loss/val", held_out, step)
    writer.close()


def write_torch_new_style(rows: list[tuple[int, float, float]], out: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(out))
    for step, train, held_out in rows:
        writer.add_scalar("train_loss", train, step, new_style=True)
        writer.add_scalar("val_loss", held_out, step, new_style=True)
    writer.close()


WRITERS = {
    "flax": write_flax,
    "clu": write_clu,
    "tensorboardx": write_tensorboardx,
    "torch-new-style": write_torch_new_style,
}

if __name__ == "__main__":
    writer, out = sys.argv[1], Path(sys.argv[2])
    for scenario in SCENARIOS:
        (out / scenario).mkdir(parents=True, exist_ok=True)
        WRITERS[writer](curves(scenario), out / scenario)
