"""What the guard's sampling costs and what it still catches between two sampled steps.

Real PyTorch training in this process. The cost contract is checked without a clock,
counting the tensor operations dispatched (a TorchDispatchMode): on an unsampled step
the guard dispatches one, and no kernel. On the CPU it reads the loss's value
(`_local_scalar_dense`, no sync there); a loss it cannot read for free (on an
accelerator, where a read is a sync; a tensor subclass) is kept as a `detach` alias.
"""

from __future__ import annotations

import collections
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar

import pytest
from torch.utils._python_dispatch import TorchDispatchMode

import torch
import trainmedic.torch as tm
from torch import nn
from trainmedic.events import GuardObservation, Step
from trainmedic.torch._budget import MAX_EVERY_FACTOR

torch.set_num_threads(1)


class _CountOps(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.ops[str(func)] += 1
        return func(*args, **(kwargs or {}))


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))


class _Tagged(torch.Tensor):
    """A tensor subclass (as DTensor is one): its value is not read between checks."""


def _ops_on_steps(guarded: bool, counted: range, loss_type: type = torch.Tensor) -> collections.Counter[str]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.utils.data.TensorDataset(torch.randn(80, 8), torch.randint(0, 3, (80,)))
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    guard = tm.guard(model, optimizer) if guarded else None
    counter = _CountOps()
    for step, (x, y) in enumerate(loader, start=1):
        mode = counter if step in counted else _CountOps()
        with mode:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            (loss if loss_type is torch.Tensor else loss.as_subclass(loss_type)).backward()
            optimizer.step()
    if guard is not None:
        guard.stop()
    return counter.ops


def test_unsampled_steps_dispatch_only_the_loss_read() -> None:
    # Steps 2..9 sit between the first check (step 1) and the second (step 10).
    bare = _ops_on_steps(False, range(2, 10))
    guarded = _ops_on_steps(True, range(2, 10))
    assert sum(bare.values()) > 0
    # The loss's value read a step (on the CPU, no sync) and nothing else: no isfinite, no norm,
    # no copy.
    assert guarded - bare == collections.Counter({"aten._local_scalar_dense.default": len(range(2, 10))})
    assert not bare - guarded
    # On a sampled window the reads are there, batched: the losses and one foreach_norm.
    window = _ops_on_steps(True, range(11, 21)) - _ops_on_steps(False, range(11, 21))
    assert window["aten._foreach_norm.Scalar"] == 1
    assert "aten.isfinite.default" not in window


def test_a_loss_not_read_for_free_is_kept_as_an_alias() -> None:
    # A subclass's value may need a collective (DTensor); an accelerator's, a sync: kept, not read.
    bare = _ops_on_steps(False, range(2, 10), _Tagged)
    guarded = _ops_on_steps(True, range(2, 10), _Tagged)
    assert guarded - bare == collections.Counter({"aten.detach.default": len(range(2, 10))})
    assert not bare - guarded


def test_a_cpu_loss_whose_read_is_refused_is_kept_as_an_alias() -> None:
    # The hooks keep the loss outside any try: a read refused (`.item()` under vmap raises)
    # must give the alias, not fail the user's backward().
    from trainmedic.torch._reads import kept

    assert isinstance(kept(torch.ones(1, requires_grad=True).sum()), float)
    kept_in_vmap = torch.vmap(lambda x: kept(x.sum()))(torch.randn(2, 3))
    assert isinstance(kept_in_vmap, torch.Tensor)
    assert kept_in_vmap.shape == (2,)


class _KeepsOnCtx(torch.autograd.Function):
    """Keeps a buffer on ctx, not through save_for_backward: backward does not free it, only
    the end of the graph's life does (a pattern common in custom autograd code)."""

    live: ClassVar[set[int]] = set()

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.buffer = torch.empty(1024)
        key = id(ctx.buffer)
        _KeepsOnCtx.live.add(key)
        weakref.finalize(ctx.buffer, _KeepsOnCtx.live.discard, key)
        return x * 2

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad * 2


@pytest.mark.parametrize("updates", ["optimizer", "by hand"])
def test_the_guard_does_not_keep_a_step_graph_alive_until_its_check(updates: str) -> None:
    # Bare, a step's graph dies when the loop drops its loss; keeping the losses for the next
    # check must not keep `every` graphs (and what custom Functions hold on ctx) alive.
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01) if updates == "optimizer" else None
    most_alive = 0
    with tm.guard(model, optimizer, every=50):
        for _ in range(120):
            model.zero_grad()
            loss = _KeepsOnCtx.apply(model(torch.randn(4, 8))).pow(2).mean()
            loss.backward()
            if optimizer is not None:
                optimizer.step()
            else:
                with torch.no_grad():
                    for p in model.parameters():
                        p.add_(p.grad, alpha=-0.01)
            most_alive = max(most_alive, len(_KeepsOnCtx.live))
    # This step's graph and, on a watched step, the graph read at its check.
    assert most_alive <= 2


def _train(
    steps: int,
    *,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = nn.functional.cross_entropy,
    spike_at: int | None = None,
    clip: float | None = None,
    nan_at: int | None = None,
    ahead: bool = False,
    **guard_options: Any,
) -> tm.Guard:
    torch.manual_seed(0)
    model = _mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    xs, ys = torch.randn(steps * 32, 16), torch.randint(0, 4, (steps * 32,))
    if spike_at is not None:
        xs[(spike_at - 1) * 32 : spike_at * 32] *= 1e4  # one batch of outliers
    if nan_at is not None:
        xs[(nan_at - 1) * 32 + 5, 3] = float("nan")  # dataset index (nan_at - 1) * 32 + 5
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xs, ys), batch_size=32)
    with tm.guard(model, optimizer, **guard_options) as guard:
        for x, y in _one_ahead(loader) if ahead else loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            if clip is not None:
                nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
    return guard


def _one_ahead(loader: Iterable[Any]) -> Iterator[Any]:
    """Batches drawn one ahead of the loop, as Accelerate's and Lightning's loaders and CUDA
    prefetchers draw them: the next is pulled before the one in hand is given out."""
    batches = iter(loader)
    current = next(batches)
    for upcoming in batches:
        yield current
        current = upcoming
    yield current


def test_gradient_explosion_between_two_samples_is_reported_at_its_step() -> None:
    # One outlier batch at step 25 (samples at 20 and 30) throws the weights far off; the
    # network half recovers: the sampled gradient norm only shows it at step 30.
    found = _train(60, spike_at=25).findings()
    (finding,) = [f for f in found if f.code == "TRN007"]
    assert finding.step == 25
    assert finding.evidence["detected_at_step"] == 30
    assert finding.evidence["param_norm"] > 10 * finding.evidence["param_norm_before"]
    assert finding.evidence["loss"] > 10 * finding.evidence["loss_median_before"]


def test_a_clipped_outlier_batch_moves_the_loss_not_the_weights_and_is_no_explosion() -> None:
    found = _train(60, spike_at=25, clip=1.0).findings()
    assert "TRN007" not in {f.code for f in found}


def test_nan_between_samples_is_reported_with_the_step_and_batch_it_first_appeared_in() -> None:
    found = _train(40, nan_at=23).findings()
    (finding,) = [f for f in found if f.code == "TRN001"]
    assert finding.step == 23  # read back at step 30, reconstructed from the kept losses
    assert finding.evidence["batch_indices"] == list(range(22 * 32, 23 * 32))
    assert "at most 9 steps late" in finding.evidence["checked"]


@pytest.mark.parametrize("nan_at", [23, 40], ids=["mid-epoch", "last-batch"])
def test_a_loop_that_draws_ahead_gets_the_batch_it_trained_on(nan_at: int) -> None:
    """Each batch is pulled one step before it trains: noted with the step before its own."""
    found = _train(40, nan_at=nan_at, ahead=True).findings()
    (finding,) = [f for f in found if f.code == "TRN001"]
    assert finding.step == nan_at
    assert finding.evidence["batch_indices"] == list(range((nan_at - 1) * 32, nan_at * 32))


def _softmax_then_ce(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return nn.functional.cross_entropy(nn.functional.softmax(logits, dim=1), y)


def _sum_of_losses(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    # softmax-ed, reshaped, then cross-entropy plus a penalty: the graph still shows it
    return nn.functional.cross_entropy(logits.softmax(dim=-1).reshape(-1, 4), y) + 1e-4 * logits.pow(2).mean()


@pytest.mark.parametrize("loss_fn", [_softmax_then_ce, _sum_of_losses])
def test_functional_cross_entropy_on_softmax_is_tor004(loss_fn: Callable[..., torch.Tensor]) -> None:
    found = _train(30, loss_fn=loss_fn).findings()
    (finding,) = [f for f in found if f.code == "TOR004"]
    assert finding.evidence["input_kind"] == "probabilities"
    assert len(finding.evidence["checked_steps"]) >= 2


def test_functional_cross_entropy_on_logits_or_nll_on_log_softmax_is_clean() -> None:
    def nll(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return nn.functional.nll_loss(nn.functional.log_softmax(logits, dim=1), y)

    for loss_fn in (nn.functional.cross_entropy, nll):
        found = _train(30, loss_fn=loss_fn).findings()
        assert "TOR004" not in {f.code for f in found}


def _sampled_steps(guard: tm.Guard, metric: str = "loss") -> list[int]:
    return [e.step for e in guard.events if isinstance(e, Step) and metric in e.metrics]


def test_on_a_tiny_cpu_model_the_checks_are_widened_to_keep_to_their_budget() -> None:
    # A 16-64-64-4 MLP steps in far less than 200 x a check's time: after the warm-up at the
    # base rate the guard reads losses and measures gradient norms less often, in multiples
    # of 10, and says so; the loss curve still has a point (its window's mean) every 10 steps.
    guard = _train(400)
    assert _sampled_steps(guard) == [1, *range(10, 401, 10)]
    steps = [e for e in guard.events if isinstance(e, Step)]
    assert all(s.duration_s is not None and s.duration_s > 0 for s in steps)
    assert all(s.data_wait_s is not None and 0 <= s.data_wait_s < s.duration_s for s in steps)
    norms = _sampled_steps(guard, "grad_norm")
    assert norms[:10] == [1, *range(10, 100, 10)]  # the warm-up: every 10 steps
    (widened, *_) = [e for e in guard.events if isinstance(e, GuardObservation) and e.check == "sampling"]
    assert widened.data["from_step"] >= 90
    assert widened.data["base_every"] == 10
    assert widened.data["every"] % 10 == 0
    assert 10 < widened.data["every"] <= 10 * MAX_EVERY_FACTOR
    assert widened.data["check_us"] > 0
    assert widened.data["step_us"] > 0
    assert len(norms) < 10 + (400 - 100) // 10  # fewer than at a fixed every=10
    assert all(step % 10 == 0 for step in norms[1:])


def test_an_explicit_every_is_kept_as_given() -> None:
    guard = _train(400, every=10)
    assert _sampled_steps(guard, "grad_norm") == [1, *range(10, 401, 10)]
    assert not [e for e in guard.events if isinstance(e, GuardObservation) and e.check == "sampling"]


def test_a_nan_after_the_rate_was_widened_is_still_reported_at_its_step_and_batch() -> None:
    guard = _train(400, nan_at=333)
    assert guard.monitor.every > 10
    (finding,) = [f for f in guard.findings() if f.code == "TRN001"]
    assert finding.step == 333
    assert finding.evidence["batch_indices"] == list(range(332 * 32, 333 * 32))
    # The rate in the evidence is the one in effect when the NaN was read; the budget may
    # widen it again at a later check (it is timed in CPU time, which varies run to run).
    rates = {
        e.data["every"] for e in guard.events if isinstance(e, GuardObservation) and e.check == "sampling"
    }
    (every,) = [
        r
        for r in rates
        if f"every {r} steps (all losses kept, reported at most {r - 1} steps late)"
        in finding.evidence["checked"]
    ]
    assert every > 10


def test_the_loss_curve_is_the_same_whether_the_checks_were_widened_or_not() -> None:
    # Every loss is kept and read: a point every 10 steps holds the mean of exactly those
    # 10 losses, however far apart the reads were.
    def curve(guard: tm.Guard) -> dict[int, float]:
        steps = [e for e in guard.events if isinstance(e, Step) and "loss" in e.metrics]
        return {e.step: e.metrics["loss"] for e in steps}

    widened, fixed = _train(300), _train(300, every=10)
    assert widened.monitor.every > 10
    assert curve(widened).keys() == curve(fixed).keys()
    assert curve(widened) == pytest.approx(curve(fixed), rel=1e-6)


def test_batch_indices_kept_without_any_check_stay_bounded() -> None:
    """A process that only iterates loaders (no optimizer, so no check) keeps the indices of at
    most MAX_NOTED finished batches, not of every epoch it ever ran."""
    from torch.utils.data import DataLoader, TensorDataset

    from trainmedic.torch._batches import MAX_NOTED

    loader = DataLoader(TensorDataset(torch.randn(6400, 4)), batch_size=8, shuffle=True)
    guard = tm.guard()
    for _ in range(30):  # 24,000 batches
        for _batch in loader:
            pass
    logs = guard.monitor.batches.logs
    guard.stop()
    assert sum(len(log) + len(log.taken) for log in logs) <= MAX_NOTED + len(loader)
