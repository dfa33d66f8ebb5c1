"""The save checks under the explicit guard (`trainmedic.torch.guard()`), on `torch.save` of a
state dict: a float16 copy whose BatchNorm statistics overflow to inf (TOR015, non-finite
tensors) beside the float32 save of the same model, which stays quiet. The guard's stop waits
for the worker that read the files back."""

from __future__ import annotations

from pathlib import Path

import pytest

import torch
import trainmedic.torch as tm
from torch import nn
from trainmedic.rules.tor import tor015_saved_model_differs as tor015


def test_a_float16_save_that_overflows_is_found_and_the_float32_one_is_not(tmp_path: Path) -> None:
    torch.manual_seed(0)
    # Unnormalised inputs (raw sensor counts in the thousands): BatchNorm's running_var
    # reaches ~1e6, beyond float16's largest value, 65504.
    model = nn.Sequential(nn.BatchNorm1d(4), nn.Linear(4, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    with tm.guard() as guard:
        for _ in range(5):
            x = torch.randn(32, 4) * 1000
            loss = nn.functional.cross_entropy(model(x), torch.randint(0, 2, (32,)))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        torch.save(model.state_dict(), tmp_path / "fp32.pt")
        torch.save({k: v.half() for k, v in model.state_dict().items()}, tmp_path / "fp16.pt")
    seen = [e for e in guard.events if getattr(e, "check", None) == tor015.RELOAD_OBSERVATION]
    (only,) = seen
    assert Path(only.data["path"]).name == "fp16.pt"
    assert only.data["kind"] == tor015.NONFINITE
    assert only.data["nonfinite_examples"] == ["0.running_var"]
    finding = next(f for f in guard.findings() if f.code == "TOR015")
    assert "non-finite values" in finding.message
    assert "65504" in (finding.fix or "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fp16.pt", "fp32.pt"]


def test_save_checks_turn_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINMEDIC_SAVE_CHECKS", "0")
    with tm.guard() as guard:
        assert not hasattr(torch.save, "__wrapped__")
        torch.save({"w": torch.full((2,), float("inf"))}, tmp_path / "inf.pt")
    assert [e for e in guard.events if getattr(e, "check", None) == tor015.RELOAD_OBSERVATION] == []
    monkeypatch.delenv("TRAINMEDIC_SAVE_CHECKS")
    with tm.guard():
        assert hasattr(torch.save, "__wrapped__")  # on by default
    assert not hasattr(torch.save, "__wrapped__")  # and restored when the guard stops


@pytest.mark.filterwarnings("ignore:.*LeafSpec.*:FutureWarning")  # Lightning 2.6 on torch 2.13
def test_a_lightning_checkpoint_of_a_diverged_module_is_found(tmp_path: Path) -> None:
    # A real Lightning fit whose SGD step is far too large: the weights overflow to inf/NaN within
    # 2 epochs and `trainer.save_checkpoint` writes them. (Its healthy twin, a converging fit's
    # checkpoint read back equal and quiet: tests/torch/test_resumes.py.)
    lightning = pytest.importorskip("lightning")
    from torch.utils.data import DataLoader, TensorDataset

    class Regressor(lightning.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))

        def training_step(self, batch: list[torch.Tensor], _: int) -> torch.Tensor:
            x, y = batch
            return nn.functional.mse_loss(self.net(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=1e4)

    x = torch.randn(32, 4, generator=torch.Generator().manual_seed(0))
    loader = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)
    trainer = lightning.Trainer(
        max_epochs=2,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    with tm.guard() as guard:
        trainer.fit(Regressor(), loader)
        trainer.save_checkpoint(tmp_path / "diverged.ckpt")
    (seen,) = [e for e in guard.events if getattr(e, "check", None) == tor015.RELOAD_OBSERVATION]
    assert Path(seen.data["path"]).name == "diverged.ckpt"
    assert seen.data["kind"] == tor015.NONFINITE
    assert seen.data["nonfinite"] == seen.data["total"] == 4
