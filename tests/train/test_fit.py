"""fit on tiny real models: accumulation, schedules, evaluation, early stopping, bad arguments."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

import torch
from torch import nn
from trainmedic.errors import UsageError
from trainmedic.train import (
    ConfigError,
    EarlyStopping,
    fit,
    linear_scaled_lr,
    one_cycle,
    param_groups,
    reduce_on_plateau,
    warmup_cosine,
    warmup_steps_for,
)


def _data(samples: int = 40, features: int = 6) -> TensorDataset:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(samples, features, generator=generator)
    y = (x[:, 0] + x[:, 1] > 0).long()
    return TensorDataset(x, y)


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 2))


def _train(batch_size: int, accum: int, samples: int = 40, **kwargs: object) -> nn.Module:
    model = _model()
    loader = DataLoader(_data(samples), batch_size=batch_size, shuffle=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    fit(model, loader, optimizer=optimizer, loss_fn=F.cross_entropy, grad_accum_steps=accum, **kwargs)  # type: ignore[arg-type]
    return model


def _max_difference(a: nn.Module, b: nn.Module) -> float:
    return max(
        float((p - q).detach().abs().max()) for p, q in zip(a.parameters(), b.parameters(), strict=True)
    )


def test_accumulation_matches_the_large_batch() -> None:
    """k micro-batches of b == one batch of k*b, including the epoch's last, partial window.

    40 samples: batch 16 gives windows of 16, 16, 8; batch 4 x 4 accumulation the same
    (4 + 4 + 4 + 4, twice, then 4 + 4: a 2-batch window scaled by 1/2, not 1/4).
    """
    big = _train(batch_size=16, accum=1, epochs=3)
    accumulated = _train(batch_size=4, accum=4, epochs=3)
    assert _max_difference(big, accumulated) < 1e-5
    wrong_scale = _train(batch_size=4, accum=3, epochs=3)  # a different window really differs
    assert _max_difference(big, wrong_scale) > 1e-3


def test_validation_restores_mode_and_reports_metrics() -> None:
    model = _model()
    model.eval()  # fit trains in train mode, and evaluates in eval mode
    seen_modes: list[bool] = []
    model.register_forward_hook(lambda m, i, o: seen_modes.append(m.training))
    loader = DataLoader(_data(), batch_size=10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    result = fit(
        model,
        loader,
        optimizer=optimizer,
        loss_fn=F.cross_entropy,
        epochs=2,
        val_loader=DataLoader(_data(20), batch_size=7),
        metrics={"accuracy": lambda out, y: (out.argmax(1) == y).float().mean()},
    )
    assert seen_modes[:4] == [True] * 4
    assert seen_modes[4:7] == [False] * 3
    assert set(result.history[0]) == {"train_loss", "val_loss", "val_accuracy", "lr"}
    assert 0.0 <= result.history[-1]["val_accuracy"] <= 1.0
    assert model.training


def test_early_stopping_stops_and_is_reported() -> None:
    model = _model()
    loader = DataLoader(_data(), batch_size=10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)  # nothing improves
    result = fit(
        model,
        loader,
        optimizer=optimizer,
        loss_fn=F.cross_entropy,
        epochs=20,
        val_loader=loader,
        early_stopping=EarlyStopping(monitor="val_loss", patience=2),
    )
    assert result.stopped_early
    assert result.epochs == 3  # the first epoch sets the best, two more without improvement


def test_schedules_step_as_they_need() -> None:
    model = _model()
    loader = DataLoader(_data(), batch_size=10)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    fit(
        model,
        loader,
        optimizer=optimizer,
        loss_fn=F.cross_entropy,
        epochs=2,
        scheduler=lambda opt: warmup_cosine(opt, warmup_steps=2, total_steps=8),
    )
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.0, abs=1e-12)  # stepped per step: 8 times
    plateau_opt = torch.optim.SGD(model.parameters(), lr=1.0)
    fit(
        model,
        loader,
        optimizer=plateau_opt,
        loss_fn=F.cross_entropy,
        epochs=3,
        val_loader=loader,
        scheduler=reduce_on_plateau(plateau_opt, patience=0, factor=0.5),
        resume=None,
    )
    lr_after = plateau_opt.param_groups[0]["lr"]
    assert lr_after in (1.0, 0.5, 0.25, 0.125)  # fed the metric once per epoch, never per step
    cycle_opt = torch.optim.SGD(model.parameters(), lr=0.1)
    fit(
        model,
        loader,
        optimizer=cycle_opt,
        loss_fn=F.cross_entropy,
        max_steps=6,
        scheduler=one_cycle(cycle_opt, max_lr=0.5, total_steps=6),
    )
    assert cycle_opt.param_groups[0]["lr"] < 0.1  # annealed: stepped 6 times, not twice (near 0.5)


def test_batch_scaling_helpers() -> None:
    assert linear_scaled_lr(0.1, effective_batch_size=1024, reference_batch_size=256) == pytest.approx(0.4)
    assert warmup_steps_for(warmup_samples=10_000, effective_batch_size=1024) == 10
    assert warmup_steps_for(warmup_samples=10_000, effective_batch_size=256) == 40


def test_param_groups_exclude_bias_and_norms() -> None:
    model = nn.Sequential(
        nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.LayerNorm(4), nn.Linear(4, 2)
    )
    groups = param_groups(model, weight_decay=0.1)
    decayed = {id(p) for p in groups[0]["params"]}
    assert groups[0]["weight_decay"] == 0.1
    assert groups[1]["weight_decay"] == 0.0
    assert decayed == {id(model[0].weight), id(model[4].weight)}
    assert len(groups[1]["params"]) == 6  # two biases, BatchNorm and LayerNorm weight + bias


def test_max_steps_mid_epoch_then_resume_equals_one_run(tmp_path: Path) -> None:
    """Stop after 3 of 10 steps (mid-epoch), resume in a new fit: same weights as one run."""
    one_run = _train(batch_size=8, accum=1, epochs=2)
    first = _train(batch_size=8, accum=1, max_steps=3, checkpoint_dir=tmp_path)
    resumed = _model()
    optimizer = torch.optim.SGD(resumed.parameters(), lr=0.1)
    result = fit(
        resumed,
        DataLoader(_data(), batch_size=8, shuffle=False),
        optimizer=optimizer,
        loss_fn=F.cross_entropy,
        epochs=2,
        checkpoint_dir=tmp_path,
    )
    assert result.resumed_from is not None
    assert result.resumed_from.endswith("step-00000003.pt")
    assert _max_difference(first, one_run) > 0  # the first part really stopped early
    assert _max_difference(resumed, one_run) == 0.0


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"epochs": 0}, "epochs"),
        ({"epochs": 1, "precision": "fp8"}, "precision"),
        ({"epochs": 1, "grad_accum_steps": 0}, "grad_accum_steps"),
        ({"epochs": 1, "max_grad_norm": -1.0}, "max_grad_norm"),
        ({}, "epochs or max_steps"),
        ({"epochs": 1, "strategy": "horovod"}, "strategy"),
        ({"epochs": 1, "resume": "/nonexistent/ckpt.pt"}, "resume"),
        ({"epochs": 1, "checkpoint_every": 5}, "checkpoint_every needs checkpoint_dir"),
        # a directory even root may not create (sysfs): a real permission failure
        ({"epochs": 1, "checkpoint_dir": "/sys/kernel/trainmedic-ckpt"}, "checkpoint_dir .* not permitted"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs: dict[str, object], argument: str) -> None:
    model = _model()
    with pytest.raises(ConfigError, match=argument) as info:
        fit(
            model,
            DataLoader(_data(), batch_size=8),
            optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
            loss_fn=F.cross_entropy,
            **kwargs,  # type: ignore[arg-type]
        )
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, UsageError)
    assert "\n" not in str(info.value)


def test_monitor_missing_is_named() -> None:
    model = _model()
    with pytest.raises(ConfigError, match=r"early_stopping\.monitor"):
        fit(
            model,
            DataLoader(_data(), batch_size=8),
            optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
            loss_fn=F.cross_entropy,
            epochs=2,
            early_stopping=EarlyStopping(monitor="val_f1"),
        )


def test_fit_does_not_touch_the_callers_loader() -> None:
    loader = DataLoader(_data(), batch_size=8, shuffle=True)
    before = copy.copy(loader.__dict__)
    model = _model()
    fit(
        model,
        loader,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        loss_fn=F.cross_entropy,
        epochs=1,
    )
    assert loader.sampler is before["sampler"]
    assert loader.batch_size == 8


def test_resume_from_environment_set_by_run_restarts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _train(batch_size=8, accum=1, max_steps=2, checkpoint_dir=tmp_path / "first")
    monkeypatch.setenv("TRAINMEDIC_RESUME_FROM", str(tmp_path / "first" / "step-00000002.json"))
    model = _model()
    result = fit(
        model,
        DataLoader(_data(), batch_size=8),
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        loss_fn=F.cross_entropy,
        max_steps=4,
        checkpoint_dir=tmp_path / "second",
    )
    assert result.resumed_from == str(tmp_path / "first" / "step-00000002.pt")
    assert result.steps == 4
    monkeypatch.setenv("TRAINMEDIC_RESUME_FROM", str(tmp_path / "missing.pt"))
    with pytest.raises(ConfigError, match=r"missing\.pt"):
        fit(
            model,
            DataLoader(_data(), batch_size=8),
            optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
            loss_fn=F.cross_entropy,
            max_steps=4,
        )


def test_fp16_uses_a_grad_scaler_that_is_checkpointed(tmp_path: Path) -> None:
    from trainmedic.checkpoint import load_latest

    model = _train(
        batch_size=8, accum=2, epochs=1, precision="fp16", max_grad_norm=1.0, checkpoint_dir=tmp_path
    )
    assert all(torch.isfinite(p).all() for p in model.parameters())
    loaded = load_latest(tmp_path)
    assert loaded is not None
    assert loaded.state["scaler"]["scale"] > 0
    assert loaded.state["config"]["precision"] == "fp16"
    assert loaded.state["progress"]["step"] == 3  # 5 micro-batches, windows of 2, 2 and 1
