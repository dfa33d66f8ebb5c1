"""Produce real training logs for the diagnose tests: `python make_logs.py FRAMEWORK OUT`.

Each framework trains a tiny model on synthetic data made here (CPU, seconds, no
downloads) and writes the logs its users have: Keras history JSON + CSVLogger +
TensorBoard, a Lightning CSVLogger metrics.csv, an HF Trainer trainer_state.json,
torch SummaryWriter event files.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


def data(n: int = 256, d: int = 8, seed: int = 0, noise: float = 0.0):
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)).astype("float32")
    w = np.random.default_rng(42).standard_normal(d).astype("float32")  # one task for every split
    y = (x @ w > 0).astype("int64")
    if noise:
        flip = rng.random(n) < noise
        y[flip] = 1 - y[flip]
    return x, y


def keras_logs(scenario: str, out: Path) -> None:
    import keras

    x, y = data()
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)]
    )
    lr = {"healthy": 0.01, "nan": 1e8}[scenario]
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=lr),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    callbacks = [
        keras.callbacks.CSVLogger(str(out / "training.csv")),
        keras.callbacks.TensorBoard(log_dir=str(out / "tb")),
    ]
    history = model.fit(x, y, epochs=8, batch_size=32, validation_split=0.25, verbose=0, callbacks=callbacks)
    (out / "history.json").write_text(json.dumps(history.history))


def lightning_logs(scenario: str, out: Path) -> None:
    import lightning as L
    from lightning.pytorch.loggers import CSVLogger
    from torch.utils.data import DataLoader, TensorDataset

    import torch
    from torch import nn

    torch.manual_seed(0)
    overfit = scenario == "overfit"
    x, y = data(n=128 if overfit else 256, d=8, seed=1, noise=0.2 if overfit else 0.0)
    xv, yv = data(n=256, d=8, seed=2, noise=0.2 if overfit else 0.0)
    hidden = 128 if overfit else 16

    class Net(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(
                nn.Linear(8, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 2)
            )

        def training_step(self, batch, _):
            xb, yb = batch
            loss = nn.functional.cross_entropy(self.net(xb), yb)
            self.log("train_loss", loss, on_step=True, on_epoch=True)
            return loss

        def validation_step(self, batch, _):
            xb, yb = batch
            self.log("val_loss", nn.functional.cross_entropy(self.net(xb), yb))

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=0.001)

    train = DataLoader(TensorDataset(torch.tensor(x), torch.tensor(y)), batch_size=16, shuffle=True)
    val = DataLoader(TensorDataset(torch.tensor(xv), torch.tensor(yv)), batch_size=64)
    trainer = L.Trainer(
        max_epochs=25 if overfit else 6,
        logger=CSVLogger(str(out), name="lightning_logs"),
        log_every_n_steps=5,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
    )
    trainer.fit(Net(), train, val)


def hf_logs(scenario: str, out: Path) -> None:
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )

    import torch

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=32,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
        num_labels=2,
    )
    model = BertForSequenceClassification(config)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(1, 32, (128, 8), generator=gen)
    labels = (ids[:, 0] > 16).long()

    class Rows(torch.utils.data.Dataset):
        def __init__(self, lo: int, hi: int) -> None:
            self.lo, self.hi = lo, hi

        def __len__(self) -> int:
            return self.hi - self.lo

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            return {"input_ids": ids[self.lo + i], "labels": labels[self.lo + i]}

    class StopAt(TrainerCallback):
        """A callback bug: ends training at step 6 although 24 steps were planned."""

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step >= 6:
                control.should_training_stop = True

    args = TrainingArguments(
        output_dir=str(out),
        num_train_epochs=3,
        per_device_train_batch_size=16,
        learning_rate=1e-3,
        logging_steps=2,
        eval_strategy="epoch",
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
    )
    callbacks = [StopAt()] if scenario == "stopped" else []
    trainer = Trainer(
        model=model, args=args, train_dataset=Rows(0, 96), eval_dataset=Rows(96, 128), callbacks=callbacks
    )
    trainer.train()
    trainer.save_state()


def tensorboard_logs(scenario: str, out: Path) -> None:
    """A tiny PyTorch classifier logging to TensorBoard with torch's SummaryWriter, as in the
    PyTorch TensorBoard tutorial. "healthy": Adam at lr=0.01 for 240 steps. "diverge": the same run
    stopped at step 120 (checkpoint saved), restarted from the checkpoint into a second folder with
    `--lr 1` typed for `--lr 1e-2`: its warm-up ramps the learning rate to 1.0 and the loss climbs."""
    from torch.utils.tensorboard import SummaryWriter

    import torch
    from torch import nn

    torch.manual_seed(0)
    x, y = (torch.tensor(a) for a in data(n=512, d=8, seed=3))
    xv, yv = (torch.tensor(a) for a in data(n=256, d=8, seed=4))
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
    loss_fn = nn.CrossEntropyLoss()

    def train(folder: Path, steps: range, lr: float, warmup: int = 0) -> None:
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        ramp = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: min(1.0, (s + 1) / warmup) if warmup else 1.0
        )
        batches = torch.Generator().manual_seed(steps.start)
        writer = SummaryWriter(log_dir=str(folder))
        for step in steps:
            model.train()
            idx = torch.randint(0, len(x), (32,), generator=batches)
            loss = loss_fn(model(x[idx]), y[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            writer.add_scalar("train/loss", loss.item(), step)
            writer.add_scalar("train/lr", optimizer.param_groups[0]["lr"], step)
            ramp.step()
            if step % 20 == 19:
                model.eval()
                with torch.no_grad():
                    writer.add_scalar("val/loss", loss_fn(model(xv), yv).item(), step)
        writer.close()

    if scenario == "healthy":
        train(out, range(240), lr=0.01)
        return
    train(out / "run1", range(120), lr=0.01)
    torch.save(model.state_dict(), out / "checkpoint.pt")
    model.load_state_dict(torch.load(out / "checkpoint.pt"))
    train(out / "run2", range(120, 240), lr=1.0, warmup=120)


SCENARIOS = {
    "keras": (keras_logs, ("healthy", "nan")),
    "lightning": (lightning_logs, ("healthy", "overfit")),
    "hf": (hf_logs, ("healthy", "stopped")),
    "tensorboard": (tensorboard_logs, ("healthy", "diverge")),
}


if __name__ == "__main__":
    framework, target = sys.argv[1:3]
    make, scenarios = SCENARIOS[framework]
    for scenario in scenarios:
        path = Path(target) / scenario
        path.mkdir(parents=True, exist_ok=True)
        make(scenario, path)
