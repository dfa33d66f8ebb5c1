"""Saves of tests/torch/test_save_reloads.py, in one process under the boot module.

    python run_save_reloads.py OUT_DIR

Each case saves under OUT_DIR; the save checks observe at the end of the process, each
observation naming its path. Plain `torch.save` of state dicts: a model's own (quiet), a DDP
model's (gloo, one process: every key under `module.`) beside its inner model's (quiet), a
torch.compile'd model's (`_orig_mod.`, the eager backend: nothing is compiled to C++) beside
its inner model's (quiet). Lightning checkpoints of modules whose `training_step` calls their own
`forward`: one without `save_hyperparameters()` (its `__init__` takes `hidden`), one with it
(quiet), one whose input statistics are a non-persistent buffer (reloaded at its initial value).
"""

import contextlib
import io
import logging
import sys
import warnings
from pathlib import Path

import torch
from torch import nn

OUT = Path(sys.argv[1])
OUT.mkdir(parents=True, exist_ok=True)
torch.manual_seed(0)
X = torch.randn(64, 8) * 3 + 1
Y = (X[:, 0] > 1).long()


def mlp():
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))


def train(model, steps=3):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(steps):
        rows = slice(16 * (i % 4), 16 * (i % 4) + 16)
        loss = nn.functional.cross_entropy(model(X[rows]), Y[rows])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


# A model's own state dict: reloaded strictly into a new copy, equal.
model = mlp()
train(model)
torch.save(model.state_dict(), OUT / "mlp.pt")

# DistributedDataParallel (gloo, world size 1): its state_dict() names every key `module.<name>`.
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

dist.init_process_group("gloo", init_method=f"file://{OUT.parent / 'store'}", rank=0, world_size=1)
ddp = DistributedDataParallel(mlp())
train(ddp)
torch.save(ddp.state_dict(), OUT / "ddp.pt")
torch.save(ddp.module.state_dict(), OUT / "ddp-module.pt")
dist.destroy_process_group()

# torch.compile: the compiled module's state_dict() names every key `_orig_mod.<name>`.
compiled = torch.compile(mlp(), backend="eager")
train(compiled)
torch.save(compiled.state_dict(), OUT / "compiled.pt")
torch.save(compiled._orig_mod.state_dict(), OUT / "compiled-orig.pt")

# -- Lightning ---------------------------------------------------------------------------------
import lightning as L  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402


class Classifier(L.LightningModule):
    """`hidden` is an argument of `__init__`: without save_hyperparameters() the checkpoint does
    not record it."""

    def __init__(self, hidden, record=True):
        super().__init__()
        if record:
            self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(8, hidden), nn.ReLU(), nn.Linear(hidden, 2))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, _):
        x, y = batch
        return nn.functional.cross_entropy(self(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class Unrecorded(Classifier):
    def __init__(self, hidden):
        super().__init__(hidden, record=False)


class Standardized(Classifier):
    """Inputs standardized by statistics gathered in training, kept in a non-persistent buffer:
    the checkpoint does not hold them, and the module rebuilt from it has its initial values."""

    def __init__(self, hidden=16):
        super().__init__(hidden)
        self.register_buffer("mean", torch.zeros(8), persistent=False)

    def forward(self, x):
        return self.net(x - self.mean)

    def training_step(self, batch, _):
        if self.global_step == 0:
            self.mean = batch[0].mean(0)
        return super().training_step(batch, _)


def fit(module, name):
    # 12 steps a fit: the guard watches a forward every 10 steps, and the probe's rows are those
    loader = DataLoader(TensorDataset(X, Y), batch_size=4)
    trainer = L.Trainer(
        max_epochs=1,
        limit_train_batches=12,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=OUT.parent,
    )
    trainer.fit(module, loader)
    trainer.save_checkpoint(OUT / name)


logging.getLogger("lightning").setLevel(logging.ERROR)
warnings.filterwarnings("ignore")
with contextlib.redirect_stderr(io.StringIO()):
    fit(Unrecorded(16), "unrecorded.ckpt")
    fit(Classifier(16), "recorded.ckpt")
    fit(Standardized(), "standardized.ckpt")
print("saved", flush=True)
