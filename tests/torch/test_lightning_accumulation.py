"""Lightning's gradient accumulation: the guard keeps the loss training_step returned.

Lightning's automatic optimization divides each loss by `accumulate_grad_batches` before
`backward()`; recorded as passed to backward, the loss curve sat at a third of the user's
loss (3 batches a step), its chance level and every figure in a finding with it.
"""

from __future__ import annotations

from typing import Any

import pytest

import torch
from torch import nn

L = pytest.importorskip("lightning")
torch.set_num_threads(1)
# Lightning 2.6 with torch 2.13 warns about torch's pytree API from its own code.
pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")


class Classifier(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
        self.returned: list[float] = []

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], index: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.returned.append(loss.item())
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05)


def fit_guarded(module: type[Classifier], **trainer_options: int) -> tuple[Classifier, list[Any]]:
    """One epoch of 60 batches of 16 (seed 0) of a new `module` under
    `trainmedic.lightning.Guard(every=10)`, with no logger, checkpoint or progress bar: the
    model and the guard's events."""
    import trainmedic.lightning

    torch.manual_seed(0)
    x, y = torch.randn(960, 8), torch.randint(0, 3, (960,))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)
    model, guard = module(), trainmedic.lightning.Guard(every=10)
    trainer = L.Trainer(
        max_epochs=1,
        callbacks=[guard],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        **trainer_options,
    )
    trainer.fit(model, loader)
    assert guard.guard is not None
    return model, guard.guard.events


@pytest.mark.parametrize("accumulate", [1, 3])
def test_the_loss_curve_is_the_loss_training_step_returned(accumulate: int) -> None:
    model, events = fit_guarded(Classifier, accumulate_grad_batches=accumulate)
    windows = [e for e in events if e.kind == "step" and "loss" in e.metrics]
    second = windows[2]  # steps 11-20: batches 10k..20k of the user's losses
    assert second.step == 20
    returned = model.returned[10 * accumulate : 20 * accumulate]
    assert second.metrics["loss"] == pytest.approx(sum(returned) / len(returned), rel=1e-5)


class Logging(Classifier):
    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], index: int) -> torch.Tensor:
        loss = super().training_step(batch, index)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        return loss


def test_what_lightning_logs_on_step_is_a_curve_point() -> None:
    """`self.log(..., on_step=True)` every `log_every_n_steps`: each logged value is a point of
    its curve at its step (the guard's windows, every 10 steps, are beside it), the value
    Lightning's loggers get, with no point on the steps Lightning does not log."""
    from trainmedic.record import RunRecord

    model, events = fit_guarded(Logging, log_every_n_steps=4)
    record = RunRecord.of(events)
    logged = [s for s in record.logged_steps if "train_loss" in s.metrics]
    assert [s.step for s in logged] == list(range(4, 61, 4))
    assert all(s.logged == "lightning" and s.epoch == 0 for s in logged)
    assert [s.metrics["train_loss"] for s in logged] == pytest.approx(model.returned[3::4], rel=1e-6)
    assert record.metric_series("train_loss")[0][1] == pytest.approx(sum(model.returned) / 60, rel=1e-5)
    assert record.steps_run == 60
