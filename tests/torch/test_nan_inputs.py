"""A NaN/Inf that comes in with the data is one finding that says so, not an explosion.

Real PyTorch training in this process, in the shape users write it: a tabular table in a
`TensorDataset` (or a list of samples, or dict samples), a `DataLoader`, an MLP. When the
loss first turns non-finite the guard re-reads that step's samples from the dataset (by the
batch's indices, which it notes anyway) and names the rows and columns that hold NaN/Inf;
TRN007 does not report the non-finite gradient norm those inputs caused.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

import torch
import trainmedic.torch as tm
from torch import nn
from trainmedic.events import FindingRaised, Step
from trainmedic.findings import Finding, Severity
from trainmedic.record import RunRecord
from trainmedic.rules.trn import trn001_nonfinite_loss as trn001
from trainmedic.rules.trn import trn007_exploding_gradients as trn007

torch.set_num_threads(1)
BATCH = 32


class _Counted(torch.utils.data.Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """A map-style dataset that counts its reads."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y, self.reads = x, y, 0

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        self.reads += 1
        return self.x[i], self.y[i]


def _table(steps: int, features: int = 12, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(steps * BATCH, features, generator=g)
    return x, (x[:, 0] + x[:, 1] > 0).long()


def _train(
    dataset: Any,
    *,
    lr: float = 1e-3,
    loss_fn: Callable[..., torch.Tensor] = nn.functional.cross_entropy,
    outputs: int = 2,
    features: int = 12,
    shuffle: bool = False,
    **guard_options: Any,
) -> tm.Guard:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(features, 32), nn.ReLU(), nn.Linear(32, outputs))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, shuffle=shuffle)
    with tm.guard(model, optimizer, **guard_options) as guard:
        for batch in loader:
            x, y = (batch["x"], batch["y"]) if isinstance(batch, dict) else batch
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
    return guard


def _errors(guard: tm.Guard) -> list[Finding]:
    return [f for f in guard.findings() if f.severity.at_least(Severity.ERROR)]


@pytest.mark.parametrize("nan_at", [10, 23], ids=["sampled-step", "between-samples"])
def test_one_nan_in_an_input_row_is_one_finding_naming_the_row_and_column(nan_at: int) -> None:
    x, y = _table(40)
    row = (nan_at - 1) * BATCH + 5
    x[row, 7] = float("nan")
    (finding,) = _errors(_train(torch.utils.data.TensorDataset(x, y)))
    assert finding.code == "TRN001"
    assert finding.step == nan_at
    inputs = finding.evidence["nonfinite_inputs"]
    assert inputs["rows"] == [row]
    assert inputs["batch_positions"] == [5]
    assert inputs["fields"] == [{"field": "sample[0]", "rows": [row], "columns": [7], "values": ["nan"]}]
    assert inputs["rows_read"] == BATCH
    assert finding.evidence["cause"] == "non-finite inputs"
    assert f"dataset row {row}" in finding.message
    assert "column 7" in finding.message
    assert "trainmedic check data" in finding.fix
    assert finding.fix.startswith("The data is the cause, not the learning rate")


def test_a_nan_target_in_a_shuffled_regression_names_the_target_field() -> None:
    x, _ = _table(30, features=6)
    y = x[:, :1].clone()
    y[100, 0] = float("inf")
    guard = _train(
        torch.utils.data.TensorDataset(x, y),
        loss_fn=nn.functional.mse_loss,
        outputs=1,
        features=6,
        shuffle=True,
    )
    (finding,) = _errors(guard)
    assert finding.code == "TRN001"
    (field,) = finding.evidence["nonfinite_inputs"]["fields"]
    assert field == {"field": "sample[1]", "rows": [100], "columns": [0], "values": ["+inf"]}
    assert 100 in finding.evidence["batch_indices"]


def test_samples_as_a_list_of_dicts_name_the_key() -> None:
    x, y = _table(20)
    x[33, 2] = float("-inf")
    samples = [{"x": x[i], "y": y[i]} for i in range(len(x))]
    (finding,) = _errors(_train(samples))
    (field,) = finding.evidence["nonfinite_inputs"]["fields"]
    assert field == {"field": "sample['x']", "rows": [33], "columns": [2], "values": ["-inf"]}
    assert finding.step == 2


def test_the_dataset_is_read_again_only_for_the_batch_of_a_nonfinite_loss() -> None:
    x, y = _table(40)
    healthy = _Counted(x.clone(), y)
    assert not _errors(_train(healthy))
    assert healthy.reads == len(x)  # the loader's reads, none more
    x[9 * BATCH + 3, 0] = float("nan")
    broken = _Counted(x, y)
    assert [f.code for f in _errors(_train(broken))] == ["TRN001"]
    assert broken.reads == len(x) + BATCH  # one batch read again, once


def test_stop_names_the_input_before_the_update() -> None:
    x, y = _table(10)
    x[70, 4] = float("nan")
    model = nn.Linear(12, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=BATCH)

    def train() -> None:
        for xb, yb in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()

    with tm.guard(model, optimizer, on_nonfinite="stop") as guard, pytest.raises(tm.NonFiniteLossError):
        train()
    (finding,) = [f for f in guard.findings() if f.code == "TRN001"]
    assert finding.step == 3
    assert finding.evidence["nonfinite_inputs"]["rows"] == [70]


def test_a_genuine_explosion_with_finite_inputs_is_still_an_explosion() -> None:
    x, y = _table(20)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e3)  # far too high: the weights blow up
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=BATCH)
    with tm.guard(model, optimizer) as guard:
        for xb, yb in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
    found = {f.code: f for f in _errors(guard)}
    assert set(found) == {"TRN001", "TRN007"}
    assert found["TRN001"].evidence["inputs"] == f"finite ({BATCH} rows of the batch read again)"
    assert "nonfinite_inputs" not in found["TRN001"].evidence
    assert found["TRN001"].fix.startswith("Lower the learning rate")


# -- TRN007 over event streams ----------------------------------------------------------------
def _input_nan(step: int, rank: int | None = None) -> FindingRaised:
    inputs = trn001.BatchInputs(
        rows_read=BATCH,
        rows_in_batch=BATCH,
        fields=(trn001.NonfiniteField(field="sample[0]", rows=(5,), columns=(3,), values=("nan",)),),
        positions=(5,),
    )
    found = trn001.judge_guard(
        trn001.GuardLoss(
            step=step,
            loss=math.nan,
            last_finite_loss=0.7,
            epoch=0,
            every=10,
            stopping=False,
            rank=rank,
            inputs=inputs,
        )
    )
    assert found is not None
    return FindingRaised(finding=found.to_dict(), rank=rank, t=float(step))


def _norms(pairs: list[tuple[int, float]], rank: int | None = None) -> list[Step]:
    return [Step(step=s, metrics={"grad_norm": n}, rank=rank, t=float(s)) for s, n in pairs]


def test_trn007_leaves_a_nonfinite_norm_to_the_inputs_that_caused_it() -> None:
    norms = _norms([(10, 1.0), (20, 1.1), (30, 0.9), (40, math.nan), (50, math.nan)])
    assert trn007.exploding_gradients(RunRecord.of(norms))  # alone, a NaN norm is an explosion
    assert trn007.exploding_gradients(RunRecord.of([*norms, _input_nan(40)])) == []
    assert trn007.exploding_gradients(RunRecord.of([*norms, _input_nan(35)])) == []


def test_trn007_still_reports_what_the_inputs_do_not_explain() -> None:
    # A finite norm after the bad batch (the loop skipped it): a later NaN norm is new.
    skipped = _norms([(10, 1.0), (20, 1.1), (30, math.nan), (40, 1.0), (50, math.nan)])
    (finding,) = trn007.exploding_gradients(RunRecord.of([*skipped, _input_nan(30)]))
    assert finding.step == 50
    # Another rank's bad input explains nothing here; a jump before it still counts.
    norms = _norms([(10, 1.0), (20, 1.1), (30, 0.9), (40, math.nan)], rank=0)
    assert trn007.exploding_gradients(RunRecord.of([*norms, _input_nan(40, rank=1)]))
    jumped = _norms([(10, 1.0), (20, 1.1), (30, 0.9), (40, 5e3), (50, math.nan)])
    (finding,) = trn007.exploding_gradients(RunRecord.of([*jumped, _input_nan(50)]))
    assert finding.step == 40
