"""The explicit guard, in this process, over every example: same findings as under `run`."""

from __future__ import annotations

import contextlib
import io
import runpy
import sys

import pytest

import torch
import trainmedic.torch as tm
from trainmedic.findings import Severity

from .conftest import EXAMPLES, EXPECTED

torch.set_num_threads(1)
# unseeded_run needs a fresh interpreter (an earlier example seeds torch): covered under `run`.
IN_PROCESS = sorted(set(EXPECTED) - {"unseeded_run"})


def run_example(name: str, fixed: bool) -> list:
    sys.path.insert(0, str(EXAMPLES))
    try:
        main = runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name="example")["main"]
        with contextlib.redirect_stdout(io.StringIO()), tm.guard() as guard:
            main() if name == "healthy" else main(fixed)
    finally:
        sys.path.remove(str(EXAMPLES))
    return guard.findings()


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)`:UserWarning")  # TOR006's own
@pytest.mark.parametrize("name", IN_PROCESS)
def test_example_and_its_fix(name: str) -> None:
    codes = {f.code for f in run_example(name, fixed=False)}
    assert EXPECTED[name] <= codes, codes
    fixed = {f.code for f in run_example(name, fixed=True)}
    assert not fixed & EXPECTED[name], fixed


def test_healthy_run_has_no_warning() -> None:
    found = run_example("healthy", fixed=False)
    assert [f for f in found if f.severity.at_least(Severity.WARNING)] == []


def test_guard_restores_everything_it_patched() -> None:
    from torch.utils.data.dataloader import _BaseDataLoaderIter

    before = (torch.autograd.backward, _BaseDataLoaderIter.__next__, torch.optim.lr_scheduler.StepLR.step)
    with tm.guard():
        assert torch.autograd.backward is not before[0]
    after = (torch.autograd.backward, _BaseDataLoaderIter.__next__, torch.optim.lr_scheduler.StepLR.step)
    assert after == before
    from torch.optim.optimizer import _global_optimizer_pre_hooks

    assert not _global_optimizer_pre_hooks


def test_nonfinite_stop_raises_before_the_update_with_batch_indices() -> None:
    torch.manual_seed(0)
    x = torch.randn(64, 4)
    x[21, 0] = float("nan")
    y = torch.randint(0, 2, (64,))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def train() -> None:
        for xb, yb in loader:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()

    with tm.guard(model, optimizer, on_nonfinite="stop") as guard, pytest.raises(tm.NonFiniteLossError):
        train()
    assert torch.isfinite(model.weight).all()  # the NaN step was never applied
    (finding,) = [f for f in guard.findings() if f.code == "TRN001"]
    assert finding.step == 3  # indices 16..23 are the third batch
    assert 21 in finding.evidence["batch_indices"]
    assert finding.evidence["batch_indices"] == list(range(16, 24))


def test_overfit_batch_passes_for_a_sound_model_and_fails_for_double_softmax() -> None:
    torch.manual_seed(0)
    x, y = torch.randn(8, 10), torch.arange(8) % 4
    good = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    result = tm.overfit_batch(good, (x, y), torch.nn.functional.cross_entropy, steps=150, lr=1e-2)
    assert result.passed
    assert result.finding is None
    assert result.final_loss < 0.05 * result.initial_loss
    bad = torch.nn.Sequential(good, torch.nn.Softmax(dim=1))
    result = tm.overfit_batch(bad, (x, y), torch.nn.functional.cross_entropy, steps=150, lr=1e-2)
    assert not result.passed
    assert result.finding is not None
    assert result.finding.code == "TRN006"
    assert result.finding.evidence["batch_size"] == 8


def test_overfit_batch_under_a_guard_runs_without_the_guards_forward_hooks() -> None:
    """The watch open at a run's start must not see the test's own forward passes (nor slow them)."""
    torch.manual_seed(0)
    hooks = torch.nn.modules.module._global_forward_pre_hooks
    model = torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    hooks_during: set[int] = set()

    def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        hooks_during.add(len(hooks))
        return torch.nn.functional.cross_entropy(output, target)

    x, y = torch.randn(8, 10), torch.arange(8) % 4
    with tm.guard(model, optimizer, every=5) as guard:
        assert guard.monitor.forward.is_open  # the first step is always watched
        assert len(hooks) == 1
        assert tm.overfit_batch(model, (x, y), loss_fn, steps=20).initial_loss > 0
        assert hooks_during == {0}
        assert guard.monitor.forward.is_open  # open again for the run's first step
        assert len(hooks) == 1
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()  # the run's first step: the reopened watch sees it, and closes
        assert list(guard.monitor.forward.roots) == [model]
        assert not guard.monitor.forward.is_open
        assert len(hooks) == 0


@pytest.mark.slow
def test_compiled_model_trains_under_the_guard_without_torch_warnings() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    compiled = torch.compile(model, backend="eager")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with tm.guard(model, optimizer, every=5) as guard:  # filterwarnings=error: any torch warning fails
        for _ in range(20):
            optimizer.zero_grad()
            x, y = torch.randn(4, 8), torch.randint(0, 2, (4,))
            torch.nn.functional.cross_entropy(compiled(x), y).backward()
            optimizer.step()
    assert [f.code for f in guard.findings() if f.severity.at_least(Severity.WARNING)] == []
    assert len([e for e in guard.events if e.kind == "step"]) == 5


def test_a_log_softmax_over_the_last_dim_keeps_the_guard_on() -> None:
    """`F.log_softmax(x, dim=-1)` (every language-model example) keeps its dim in autograd as an
    unsigned 64-bit value: the single-class check must read it as -1, not turn the guard off."""
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 5)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 8), torch.randint(0, 5, (32,))
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), tm.guard(every=1) as guard:
        for _ in range(12):
            optimizer.zero_grad()
            loss = torch.nn.functional.nll_loss(torch.nn.functional.log_softmax(model(x), dim=-1), y)
            loss.backward()
            optimizer.step()
    assert "internal error" not in stderr.getvalue()
    assert not guard.monitor.broken
    assert [f for f in guard.findings() if f.severity.at_least(Severity.WARNING)] == []


def test_a_log_softmax_over_a_last_dim_of_size_one_is_a_single_class_loss() -> None:
    """`log_softmax(dim=-1)` over one column (the dim read back as -1, not 2**64 - 1): TOR009,
    with the guard still on to the last step."""
    columns = 1
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, columns))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), tm.guard(model, optimizer, every=5) as guard:
        for _ in range(20):
            optimizer.zero_grad()
            x, y = torch.randn(8, 6), torch.randint(0, columns, (8,))
            torch.nn.functional.nll_loss(torch.log_softmax(model(x), dim=-1), y).backward()
            optimizer.step()
    assert "internal error" not in stderr.getvalue()
    codes = [f.code for f in guard.findings() if f.severity.at_least(Severity.WARNING)]
    assert codes == ["TOR009"]
    assert [e.step for e in guard.events if e.kind == "step"][-1] == 20


@pytest.mark.parametrize("first", ["scheduler", "optimizer"])
def test_warm_restarts_stepped_before_the_optimizer_is_tor006(first: str) -> None:
    """CosineAnnealingWarmRestarts never counts its steps (`_step_count` stays 0): its
    constructor's own step is told from the user's by being the first."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    x, y = torch.randn(64, 4), torch.randint(0, 2, (64,))
    with tm.guard(every=5) as guard:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(optimizer, T_0=10)
        for i in range(20):
            if first == "scheduler":
                scheduler.step(i / 10)
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            if first == "optimizer":
                scheduler.step(i / 10)
    codes = [f.code for f in guard.findings() if f.severity.at_least(Severity.WARNING)]
    assert codes == (["TOR006"] if first == "scheduler" else [])


def test_a_warm_up_chained_by_sequential_lr_is_not_tor006() -> None:
    """SequentialLR's constructor takes its first part's initial step again (torchvision's
    classification reference: LinearLR warm-up, then cosine); the user steps it after the
    optimizer."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    x, y = torch.randn(64, 4), torch.randint(0, 2, (64,))
    with tm.guard(every=5) as guard:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=5)
        cosine = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=15)
        scheduler = torch.optim.lr_scheduler.SequentialLR(optimizer, [warmup, cosine], milestones=[5])
        for _ in range(20):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            scheduler.step()
    assert [f.code for f in guard.findings() if f.severity.at_least(Severity.WARNING)] == []


@pytest.mark.parametrize("frozen", ["batch-norm", "model"])
def test_batch_norm_frozen_for_fine_tuning_is_deliberate_a_model_left_in_eval_is_tor002(frozen: str) -> None:
    """`model.train()` then every BatchNorm in `eval()` (small-batch fine-tuning, no dropout)
    is on purpose; the whole model left in `eval()` after validation is the bug."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.Flatten(),
        torch.nn.Linear(8 * 6 * 6, 2),
    )  # fmt: skip
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.randn(64, 1, 8, 8), torch.randint(0, 2, (64,))
    with tm.guard(every=5) as guard:
        for _ in range(60):
            if frozen == "batch-norm":
                model.train()
                model[1].eval()
            else:
                model.eval()
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
    codes = [f.code for f in guard.findings() if f.severity.at_least(Severity.WARNING)]
    assert codes == ([] if frozen == "batch-norm" else ["TOR002"])


@pytest.mark.parametrize("batches", ["by-hand", "data-loader"])
def test_epochs_are_known_only_where_a_data_loader_counts_them(batches: str) -> None:
    """A loop that slices its batches itself (seq2seq, RL) has no epochs the guard can see:
    its events carry none, and no finding places it in 'epoch 1'."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(80, 4), torch.randint(0, 2, (80,))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
    with tm.guard(every=5) as guard:
        for _ in range(3):
            pairs = loader if batches == "data-loader" else zip(x.split(8), y.split(8), strict=True)
            for xb, yb in pairs:
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(xb), yb).backward()
                optimizer.step()
    epochs = {e.epoch for e in guard.events if e.kind == "step"}
    assert epochs == ({None} if batches == "by-hand" else {0, 1, 2})
