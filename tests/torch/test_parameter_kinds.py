"""Every kind of parameter keeps the PyTorch guard on; a failing check costs that check (issue #41).

Keras 3 on the torch backend puts its seed generator's integer state among
`model.parameters()`: the parameter norm of the explosion check turned the guard off at the
first step, and the run recorded no step. The checks read only what a norm can read, and
an error inside one of them is a RUN011 info with the guard still on.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import torch
import trainmedic.torch as tm
from trainmedic.findings import Severity

from .conftest import REPO, SINGLE_THREAD

torch.set_num_threads(1)
STEPS = 12


class Kinds(torch.nn.Module):
    """Float weights trained, and beside them a parameter of every other kind in the optimizer."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 2)
        self.embedding = torch.nn.Embedding(10, 2, sparse=True)  # sparse gradients
        self.phase = torch.nn.Parameter(torch.randn(4, 2, dtype=torch.complex64))  # complex, trained
        self.frozen = torch.nn.Parameter(torch.randn(3), requires_grad=False)  # no gradient
        self.seed_state = torch.nn.Parameter(torch.tensor([7, 11], dtype=torch.int32), requires_grad=False)
        self.flags = torch.nn.Parameter(torch.ones(2, dtype=torch.bool), requires_grad=False)
        quantized = torch.quantize_per_tensor(torch.randn(3), 0.1, 0, torch.qint8)
        self.quantized = torch.nn.Parameter(quantized, requires_grad=False)
        self.deferred = torch.nn.Parameter(torch.empty(5, device="meta"), requires_grad=False)

    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        rotated = (x.to(torch.complex64) @ self.phase).abs()
        return self.linear(x) + self.embedding(ids) + rotated


def total_grad_norm(model: torch.nn.Module) -> float:
    squares = 0.0
    for p in model.parameters():
        if p.grad is not None:
            grad = p.grad.coalesce().values() if p.grad.is_sparse else p.grad
            squares += float(torch.linalg.vector_norm(grad)) ** 2
    return squares**0.5


def train_kinds(model: torch.nn.Module) -> tuple[Any, list[float], str]:
    torch.manual_seed(0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    x, ids, y = torch.randn(16, 4), torch.randint(0, 10, (16,)), torch.randint(0, 2, (16,))
    expected: list[float] = []
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), tm.guard(model, optimizer, every=1) as guard:
        for _ in range(STEPS):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x, ids), y).backward()
            expected.append(total_grad_norm(model))
            optimizer.step()
    return guard, expected, stderr.getvalue()


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")  # deprecated, still made
def test_every_parameter_kind_keeps_the_guard_on_and_its_gradients_measured() -> None:
    guard, expected, stderr = train_kinds(Kinds())
    assert "internal error" not in stderr, stderr
    assert not guard.monitor.broken
    measured = [e.metrics["grad_norm"] for e in guard.events if e.kind == "step" and "grad_norm" in e.metrics]
    assert len(measured) == STEPS
    # The sparse embedding's and the complex weight's gradients are in the norm, not skipped.
    for got, want in zip(measured, expected, strict=True):
        assert abs(got - want) <= 1e-5 * max(1.0, want), (got, want)
    assert [f.code for f in guard.findings() if f.severity.at_least(Severity.WARNING)] == []
    assert all(f.code != "RUN011" for f in guard.findings())


class Unreadable(torch.Tensor):
    """A tensor subclass of a library the guard does not know, whose norms fail."""

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if "norm" in getattr(func, "__name__", ""):
            raise NotImplementedError(f"{cls.__name__} has no {func.__name__}")
        return super().__torch_function__(func, types, args, kwargs or {})


def test_a_check_that_fails_costs_that_check_and_is_reported_as_info() -> None:
    """A norm that raises loses the gradient norms, not the guard: every step is still recorded,
    the loss-based checks still run, and RUN011 says which check failed."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    model.weight = torch.nn.Parameter(model.weight.detach().as_subclass(Unreadable))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(16, 4), torch.randint(0, 2, (16,))
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), tm.guard(model, optimizer, every=1) as guard:
        for _ in range(STEPS):
            # Gradients never zeroed: TOR003, found though the norms fail on every check.
            torch.nn.functional.cross_entropy(model(x).as_subclass(torch.Tensor), y).backward()
            optimizer.step()
    assert not guard.monitor.broken
    assert len([e for e in guard.events if e.kind == "step"]) == STEPS
    found = {f.code: f for f in guard.findings()}
    assert "TOR003" in found
    failed = found["RUN011"]
    assert failed.severity is Severity.INFO
    assert "NotImplementedError" in failed.message
    assert stderr.getvalue().count("trainmedic:") == len(failed.evidence["checks"]), stderr.getvalue()


KERAS_SCRIPT = textwrap.dedent(
    """
    import keras
    import torch

    keras.utils.set_random_seed(0)
    x = torch.randn(512, 20)
    y = (x[:, :3].sum(1) > 0).long()
    model = keras.Sequential([
        keras.Input((20,)),
        keras.layers.Dense(32, activation="relu"),
        keras.layers.Dropout(0.2),
        keras.layers.Dense(2),
    ])
    assert any(not p.dtype.is_floating_point for p in model.parameters())  # the seed state
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = torch.nn.CrossEntropyLoss()
    for epoch in range(3):
        for i in range(0, 512, 32):
            optimizer.zero_grad()
            loss = loss_fn(model(x[i:i + 32], training=True), y[i:i + 32])
            loss.backward()
            optimizer.step()
    """
)


def test_a_keras_model_in_a_torch_loop_is_guarded_to_the_end(tmp_path: Path) -> None:
    """KERAS_BACKEND=torch, a Sequential with Dropout, torch.optim.Adam over model.parameters()."""
    script = tmp_path / "keras_adam.py"
    script.write_text(KERAS_SCRIPT)
    env = {**os.environ, **SINGLE_THREAD, "KERAS_BACKEND": "torch"}
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "trainmedic", "run", "--out", str(out), "--", sys.executable, str(script)],
        check=False,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "internal error" not in done.stderr, done.stderr[-2000:]
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    steps = [e for e in events if e.get("kind") == "step"]
    assert max((e["step"] for e in steps), default=0) >= 40  # 48 steps, a point every 10
    assert any("grad_norm" in e.get("metrics", {}) for e in steps)
    assert not any(e.get("check") == "guard_check_failed" for e in events)


def test_a_parameter_whose_storage_was_freed_is_not_read() -> None:
    # What FSDP2 does to an unsharded parameter after its forward and backward (the module keeps
    # the tensor, its storage resized to 0 bytes): a norm of it crashed the process. The real
    # two-rank job: tests/llm/test_fsdp_saves.py.
    from trainmedic.torch._reads import readable

    weight = torch.nn.Parameter(torch.randn(4, 4))
    assert readable(weight) is weight
    weight.untyped_storage().resize_(0)
    assert readable(weight) is None
