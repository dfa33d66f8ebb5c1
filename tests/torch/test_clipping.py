"""Gradient clipping under the explicit guard, in this process: the norm before clipping is kept.

Real training (the word-language-model style example of examples/torch, and small loops
here). A clipped run's applied gradient norm is the threshold at every step it engages, so
these tests read what only the pre-clip norms can show: TRN010 on a learning rate 10,000x
too high, nothing on a healthy clipped run with warm-up, and no cost on unsampled steps.
"""

from __future__ import annotations

import collections
import contextlib
import io
import re
import runpy
import sys
from typing import Any

import pytest
from torch.nn.utils import clip_grad_norm_  # bound before any guard starts, as scripts do
from torch.utils._python_dispatch import TorchDispatchMode

import torch
import trainmedic.torch as tm
from torch import nn
from trainmedic.events import GuardObservation, Metric, Step
from trainmedic.findings import Severity
from trainmedic.record import RunRecord
from trainmedic.report.html import render_html

from .conftest import EXAMPLES

torch.set_num_threads(1)


def run_example(fixed: bool) -> tm.Guard:
    sys.path.insert(0, str(EXAMPLES))
    try:
        main = runpy.run_path(str(EXAMPLES / "clipping_saturated.py"), run_name="example")["main"]
        with contextlib.redirect_stdout(io.StringIO()), tm.guard() as guard:
            main(fixed)
    finally:
        sys.path.remove(str(EXAMPLES))
    return guard


@pytest.fixture(scope="module")
def too_high() -> tm.Guard:
    return run_example(fixed=False)


@pytest.fixture(scope="module")
def healthy() -> tm.Guard:
    return run_example(fixed=True)


def clipping(guard: tm.Guard) -> list[dict[str, Any]]:
    return [e.data for e in guard.events if isinstance(e, GuardObservation) and e.check == "clipping"]


@pytest.mark.slow
def test_a_learning_rate_10000x_too_high_is_reported_with_the_pre_clip_norms(too_high: tm.Guard) -> None:
    found = too_high.findings()
    (finding,) = [f for f in found if f.code == "TRN010"]
    assert finding.severity is Severity.WARNING
    evidence = finding.evidence
    assert evidence["threshold"] == 0.8
    assert evidence["clipping"] == "clip_grad_norm_"
    assert evidence["engaged_share"] >= 0.9
    assert evidence["median_preclip_norm"] > 100 * 0.8
    assert evidence["median_factor"] > 100
    assert evidence["measured"] == "every call"
    first, last = evidence["steps"]
    assert evidence["calls"] == last - first + 1  # every clipped step after warm-up
    assert last == 150  # read at exit too, after the example's optimizer was freed
    assert "pre-clip norm median" in finding.message
    # What the optimizer applied is the threshold at every sampled step: the explosion TRN007
    # cannot see, and the reason the pre-clip norm is recorded at all.
    applied = [
        s.metrics["grad_norm"] for s in too_high.events if isinstance(s, Step) and "grad_norm" in s.metrics
    ]
    assert applied
    assert all(n == pytest.approx(0.8, rel=1e-3) for n in applied[1:])
    assert "TRN007" not in {f.code for f in found}
    preclip = [m for m in too_high.events if isinstance(m, Metric) and m.name == "grad_norm_preclip"]
    assert len(preclip) == len(clipping(too_high))
    assert sorted(m.value for m in preclip)[len(preclip) // 2] > 100


@pytest.mark.slow
def test_a_healthy_clipped_run_with_warm_up_gives_no_warning(healthy: tm.Guard) -> None:
    found = healthy.findings()
    assert [f for f in found if f.severity.at_least(Severity.WARNING)] == [], found
    reads = clipping(healthy)
    assert sum(r["calls"] for r in reads) == 150  # every clip_grad_norm_ call was seen
    early = [r for r in reads if r["last_step"] <= 30]
    late = [r for r in reads if r["first_step"] > 30]
    assert sum(r["engaged"] for r in early) >= 10  # clipping did engage during warm-up
    assert sum(r["engaged"] for r in late) <= 0.2 * sum(r["calls"] for r in late)


@pytest.mark.slow
def test_the_report_draws_the_norms_before_and_after_clipping(too_high: tm.Guard) -> None:
    page = render_html(RunRecord.of(too_high.events), too_high.findings(), None, [], "clipped")
    chart = re.search(r'data-chart="metric-step-grad_norm".*?</figure>', page, re.S)
    assert chart is not None
    assert "<title>grad_norm</title>" in chart.group(0)
    assert "<title>grad_norm_preclip</title>" in chart.group(0)
    assert "clipping threshold" in chart.group(0)
    assert "log scale" in chart.group(0)  # 0.8 after clipping, ~1,000 before: both visible


def transformer_steps(steps: int, clip: Any, lr: float, every: int | None = None) -> tm.Guard:
    """A small Transformer classifier trained with SGD; `clip(params)` runs before each update."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    model = nn.Sequential(nn.Linear(5, 16), nn.TransformerEncoder(layer, 2, enable_nested_tensor=False))
    head = nn.Linear(16, 4)
    params = [*model.parameters(), *head.parameters()]
    optimizer = torch.optim.SGD(params, lr=lr)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 4, 5, generator=g)
    y = (x.flatten(1) @ torch.randn(20, 4, generator=g)).argmax(dim=1)
    with tm.guard(model, optimizer, every=every) as guard:
        for step in range(steps):
            batch = slice(32 * (step % 16), 32 * (step % 16 + 1))
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(head(model(x[batch]).mean(dim=1)), y[batch])
            loss.backward()
            clip(p for p in params)  # a generator, as model.parameters() is
            optimizer.step()
    return guard


@pytest.mark.slow
def test_value_clipping_is_measured_on_sampled_steps() -> None:
    too_high = transformer_steps(100, lambda ps: nn.utils.clip_grad_value_(ps, 0.01), lr=1000.0, every=5)
    (finding,) = [f for f in too_high.findings() if f.code == "TRN010"]
    assert finding.evidence["clipping"] == "clip_grad_value_"
    assert finding.evidence["measured"] == "sampled steps (every 5)"
    assert finding.evidence["median_factor"] >= 10
    reads = clipping(too_high)
    assert sum(r["calls"] for r in reads) == 1 + 100 // 5  # step 1, then every 5th
    healthy = transformer_steps(100, lambda ps: nn.utils.clip_grad_value_(ps, 1.0), lr=0.05, every=5)
    assert [f for f in healthy.findings() if f.severity.at_least(Severity.WARNING)] == []


def test_a_name_bound_before_the_guard_is_seen_and_max_norm_inf_is_not_clipping() -> None:
    guard = transformer_steps(20, lambda ps: clip_grad_norm_(ps, 0.5), lr=0.05)
    assert sum(r["calls"] for r in clipping(guard)) == 20
    assert clipping(guard)[-1]["threshold"] == 0.5
    # The HF Trainer measures the norm with max_norm=inf when max_grad_norm is 0: no clipping.
    unclipped = transformer_steps(20, lambda ps: nn.utils.clip_grad_norm_(ps, float("inf")), lr=0.05)
    assert clipping(unclipped) == []


def test_the_guard_restores_the_clipping_functions() -> None:
    from torch.nn.utils import clip_grad

    before = (clip_grad._clip_grads_with_norm_, nn.utils.clip_grads_with_norm_, nn.utils.clip_grad_value_)
    with tm.guard():
        assert clip_grad._clip_grads_with_norm_ is not before[0]
        assert nn.utils.clip_grad_value_ is not before[2]
    assert (
        clip_grad._clip_grads_with_norm_,
        nn.utils.clip_grads_with_norm_,
        nn.utils.clip_grad_value_,
    ) == before


class _CountOps(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.ops[str(func)] += 1
        return func(*args, **(kwargs or {}))


def _clipped_ops(guarded: bool) -> collections.Counter[str]:
    """Tensor ops dispatched on steps 2-9 (between the first two checks) of a clipped loop."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = tm.guard(model, optimizer) if guarded else None
    counter = _CountOps()
    for step in range(1, 12):
        with counter if 2 <= step <= 9 else _CountOps():
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(torch.randn(4, 8)), torch.randint(0, 3, (4,))).backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1e-3)
            optimizer.step()
    if guard is not None:
        guard.stop()
        assert sum(r["engaged"] for r in clipping(guard)) == 11
    return counter.ops


def test_keeping_the_pre_clip_norm_dispatches_only_its_read() -> None:
    # On the CPU the loss's value and the pre-clip norm's are read as they are kept (no sync
    # there, tests/torch/test_guard_sampling.py): one read each a step, no norm computed again.
    extra = _clipped_ops(guarded=True)
    extra.subtract(_clipped_ops(guarded=False))
    assert +extra == collections.Counter({"aten._local_scalar_dense.default": 16})
    assert not -extra


@pytest.mark.slow
def test_accelerate_clip_grad_norm_is_seen() -> None:
    accelerate = pytest.importorskip("accelerate")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    optimizer = torch.optim.AdamW(model.parameters(), lr=10.0)  # 10,000x 1e-3
    accelerator = accelerate.Accelerator(cpu=True)
    model, optimizer = accelerator.prepare(model, optimizer)
    with tm.guard(model, optimizer) as guard:
        for _ in range(30):
            optimizer.zero_grad()
            x = torch.randn(16, 8)
            accelerator.backward(nn.functional.cross_entropy(model(x), (x[:, 0] > 0).long()))
            accelerator.clip_grad_norm_(model.parameters(), 0.5)
            optimizer.step()
    reads = clipping(guard)
    assert sum(r["calls"] for r in reads) == 30
    assert reads[-1]["threshold"] == 0.5
