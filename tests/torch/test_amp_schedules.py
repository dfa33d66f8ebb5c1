"""TRN011-TRN013 under the boot module (as under `trainmedic run`, no code change): real CPU runs.

A GradScaler that skips most steps (NaN gradients from sqrt at 0, fp16 autocast), a
schedule at 0 for most of the run, and bf16 weights under Adam each give their finding;
their fixed forms and the healthy controls (fp16 AMP whose scale settles after early
skips, warm-up + cosine or linear decay to 0 at the last step, OneCycle, ReduceLROnPlateau,
StepLR, bf16 autocast on fp32 weights) give none of the three, and no warning at all. The
bugs with their fixed forms share one interpreter, the controls another, each case with a
fresh monitor (tests/torch/run_examples.py). In this process: an unsampled step of an AMP
loop with a schedule, or of bf16 weights, dispatches no tensor op beyond the loss's read, as
an fp32 step.
"""

from __future__ import annotations

import collections
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from torch.utils._python_dispatch import TorchDispatchMode

import torch
import trainmedic.torch as tm
from torch import nn
from trainmedic.findings import Finding, Severity
from trainmedic.record import RunRecord
from trainmedic.registry import run_rules

from ..helpers import InstrumentedRun, records_by_case, run_instrumented
from .conftest import EXAMPLES, SINGLE_THREAD

HERE = Path(__file__).resolve().parent
torch.set_num_threads(1)
BUGS = {
    "optimizer_steps_skipped": "TRN011",
    "zero_learning_rate": "TRN012",
    "updates_below_precision": "TRN013",
}
CONTROLS = [
    "amp-early-skips",
    "warmup-cosine",
    "warmup-linear",
    "onecycle",
    "plateau",
    "steplr",
    "bf16-autocast",
]
OURS = set(BUGS.values())


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, InstrumentedRun]:
    """Two instrumented interpreters at once (torch imports once in each): the three bugs with
    their fixed forms, and the controls (`amp_schedules_healthy.py VARIANT` each)."""
    tmp = tmp_path_factory.mktemp("amp")
    cases = [c for name in BUGS for c in (name, f"{name}:fixed")]
    controls = [f"amp_schedules_healthy:{variant}" for variant in CONTROLS]
    jobs = {
        name: ["python", str(HERE / "run_examples.py"), *argv]
        for name, argv in (("examples", cases), ("controls", controls))
    }

    def one(name: str) -> InstrumentedRun:
        folder = tmp / name
        folder.mkdir()
        return run_instrumented(jobs[name], folder, env=SINGLE_THREAD, cwd=EXAMPLES)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(jobs, pool.map(one, jobs), strict=True))


def _cases(run: InstrumentedRun) -> dict[str, RunRecord]:
    assert run.result.returncode == 0, run.result.stderr[-3000:]
    return records_by_case(run.record)


@pytest.fixture(scope="module")
def per_example(runs: dict[str, InstrumentedRun]) -> dict[str, RunRecord]:
    return _cases(runs["examples"])


@pytest.fixture(scope="module")
def per_control(runs: dict[str, InstrumentedRun]) -> dict[str, RunRecord]:
    """Each control's record, by its variant."""
    return {case.partition(":")[2]: record for case, record in _cases(runs["controls"]).items()}


def loud(record: RunRecord) -> list[Finding]:
    return [f for f in run_rules(record) if f.severity.at_least(Severity.WARNING)]


def found(record: RunRecord, code: str) -> Finding:
    (finding,) = [f for f in run_rules(record) if f.code == code]
    return finding


@pytest.mark.slow
def test_a_scaler_that_skips_most_steps_is_reported_with_its_scale_and_parameter(per_example) -> None:
    finding = found(per_example["optimizer_steps_skipped"], "TRN011")
    assert finding.evidence["skipped_share"] >= 0.8
    assert finding.evidence["final_scale"] < 1e-20 < 65536.0 == finding.evidence["init_scale"]
    assert finding.evidence["first_nonfinite_param"] == "weight"  # the learned scale under sqrt
    assert not {f.code for f in run_rules(per_example["optimizer_steps_skipped:fixed"])} & OURS


@pytest.mark.slow
def test_a_schedule_at_zero_for_most_of_the_run_is_reported_with_its_shape(per_example) -> None:
    finding = found(per_example["zero_learning_rate"], "TRN012")
    assert finding.evidence["share"] >= 0.7
    assert finding.evidence["base_lr"] == 1e-3
    record = per_example["zero_learning_rate"]
    last = max(s.step or 0 for s in record.steps if "lr" in s.metrics)
    first, end = finding.evidence["ranges"][-1]
    assert first <= 70  # 0 from the end of the first epoch (step 64) on
    assert end == last
    assert "sized for about" in finding.message
    assert not {f.code for f in run_rules(per_example["zero_learning_rate:fixed"])} & OURS


@pytest.mark.slow
def test_bf16_weights_whose_updates_round_away_are_reported(per_example) -> None:
    finding = found(per_example["updates_below_precision"], "TRN013")
    assert finding.evidence["dtype"] == "bfloat16"
    assert finding.evidence["unchanged_share"] >= 0.6
    assert finding.evidence["update_weight_ratio"] < finding.evidence["resolution"]
    fixed = per_example["updates_below_precision:fixed"]  # fp32 weights under bf16 autocast
    assert not {f.code for f in run_rules(fixed)} & OURS
    assert loud(fixed) == []  # no warning at all: the failure benchmark's control relies on it


@pytest.mark.slow
@pytest.mark.parametrize("variant", CONTROLS)
def test_healthy_amp_and_schedules_stay_quiet(per_control, variant: str) -> None:
    record = per_control[variant]
    assert record.steps  # the control trained under the guard
    assert loud(record) == []
    checks = {o.check for o in record.guard_observations}
    if variant == "amp-early-skips":  # the scaler was read, and skipped a few early steps
        skipped = sum(int(o.data["skipped"]) for o in record.guard_observations if o.check == "grad_scaler")
        assert 1 <= skipped <= 32
    if variant in ("warmup-cosine", "onecycle", "plateau"):
        assert "lr_schedule" in checks


class _CountOps(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.ops[str(func)] += 1
        return func(*args, **(kwargs or {}))


def _ops_on_steps(guarded: bool, kind: str, counted: range) -> collections.Counter[str]:
    """A fp16 GradScaler loop with a per-step schedule, or bf16 weights under Adam: the ops the
    steps in `counted` dispatch (steps 2-9 lie between the first check and the second)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    if kind == "bf16":
        model = model.to(torch.bfloat16)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 5))
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8, enabled=kind == "amp")
    x, y = torch.randn(80, 8), torch.randint(0, 3, (80,))
    guard = tm.guard(model, optimizer) if guarded else None
    counter = _CountOps()
    for step in range(1, 21):
        xb, yb = x[4 * step - 4 : 4 * step], y[4 * step - 4 : 4 * step]
        with counter if step in counted else _CountOps():
            optimizer.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16, enabled=kind == "amp"):
                logits = model(xb.to(torch.bfloat16) if kind == "bf16" else xb)
            scaler.scale(nn.functional.cross_entropy(logits.float(), yb)).backward()
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
    if guard is not None:
        guard.stop()
    return counter.ops


@pytest.mark.parametrize("kind", ["amp", "bf16"])
def test_unsampled_amp_and_bf16_steps_dispatch_only_the_loss_read(kind: str) -> None:
    bare = _ops_on_steps(False, kind, range(2, 10))
    guarded = _ops_on_steps(True, kind, range(2, 10))
    assert sum(bare.values()) > 0
    # The scaler's count, the scheduler's note and the weights' samples add no tensor op there.
    assert guarded - bare == collections.Counter({"aten._local_scalar_dense.default": len(range(2, 10))})
    assert not bare - guarded
