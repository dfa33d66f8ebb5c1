"""Printed step lines ("step 100, loss: nan") read as curve points, strictly, and cheaply past the
line budget; on a run's record they give the loss curve only where no guard measures the loss."""

from __future__ import annotations

import math

import pytest

from trainmedic.events import Event, Step
from trainmedic.evidence import logtext as _logtext
from trainmedic.record import RunRecord
from trainmedic.rules.trn.trn001_nonfinite_loss import nonfinite_loss
from trainmedic.supervise.loginterp import LogInterpreter
from trainmedic.supervise.logstream import LineScanner
from trainmedic.supervise.metriclines import PRINTED, epoch_metrics, step_metrics

ABSL = "I1207 13:45:06.290143 140192970963840 train.py:152] "

READ = {
    "step 100, loss: 0.53": (100, {"loss": 0.53}),  # optax's README loop
    "step: 100, loss: 0.53": (100, {"loss": 0.53}),
    "Step=7 | train_loss=1.5e-2 | lr: 3e-4": (7, {"train_loss": 0.015, "lr": 3e-4}),
    ABSL + "step: 3, loss: 0.41, accuracy: 97.5%": (3, {"loss": 0.41, "accuracy": 97.5}),
    "INFO:absl:step 12, val loss: 2.0": (12, {"val loss": 2.0}),
}
NOT_READ = [
    "Train Epoch: 3 [640/60000]\tLoss: 0.204",  # PyTorch's MNIST example: a progress line
    "step 100: train loss 4.1, val loss 4.2",  # nanoGPT: a sentence
    "epoch 1 step   7 loss 0.300",  # a sentence
    "| step   1 | loss     7.20",  # a table row
    "Epoch [1/5], Step [100/600], Loss: 0.2",  # the PyTorch tutorial's progress line
    "step 3/100, loss: 0.5",  # a count of steps
    "step 2.5, loss: 0.5",  # not a whole step
    "step 5, accuracy: 0.9",  # no loss
    "step 5, loss: 0.5, saved to /tmp/ckpt",  # not only metrics
    "step 5, loss: 0.5s",
    "100%|#####| step 5, loss: 0.3",  # a bar
    "{'loss': 0.41, 'step': 5}",  # a dict (the HF Trainer's, read in process)
    "[rank0]: step 5, loss: 0.3",  # torchrun's rank prefix: ranks are the guard's to tell apart
    "Step 5 finished, loss is 0.3",
]


def test_step_lines_are_read_with_their_metrics() -> None:
    for line, expected in READ.items():
        assert step_metrics(line) == expected, line
        assert epoch_metrics(line) is None, line  # never read twice
    nan = step_metrics("step 100, loss: nan")
    assert nan is not None
    assert nan[0] == 100
    assert math.isnan(nan[1]["loss"])


def test_ordinary_lines_are_not_step_lines() -> None:
    for line in NOT_READ:
        assert step_metrics(line) is None, line
    # PyTorch's MNIST line is read by neither parser (it is no epoch summary either)
    assert epoch_metrics(NOT_READ[0]) is None


def test_the_interpreter_sends_the_printed_stream_at_the_printed_step() -> None:
    events: list[Event] = []
    logs = LogInterpreter(events.append)
    for i in (0, 100, 200):
        logs.on_line("stdout", f"step {i}, epoch: 1, loss: {1 / (i + 1)}")
    logs.on_line("stdout", "epoch:  1, train_loss: 0.5000")
    steps = [e for e in events if isinstance(e, Step)]
    assert [(s.step, s.logged, s.epoch, s.metrics) for s in steps] == [
        (0, PRINTED, None, {"loss": 1.0}),
        (100, PRINTED, None, {"loss": 1 / 101}),
        (200, PRINTED, None, {"loss": 1 / 201}),
    ]


def scanned(data: bytes) -> list[Event]:
    events: list[Event] = []
    logs = LogInterpreter(events.append)
    scanner = LineScanner("stdout", logs)
    for at in range(0, len(data), 65536):
        scanner.feed(data[at : at + 65536])
    scanner.close()
    return events


def test_past_the_line_budget_every_step_line_is_still_read() -> None:
    """A loop that prints every step: the NaN long after the budget of 2000 lines is a point."""
    lines = [f"step {i}, loss: {'nan' if i == 4500 else 0.5}\n" for i in range(5000)]
    steps = [e for e in scanned("".join(lines).encode()) if isinstance(e, Step)]
    assert len(steps) == 5000
    assert [s.step for s in steps if math.isnan(s.metrics["loss"])] == [4500]


@pytest.mark.parametrize("filler", [b"", b"step 7 loss 0.3125 lr 3e-4\n" * 100, b"php h\rp\r\n" * 100])
def test_the_byte_scan_finds_every_metric_line(filler: bytes) -> None:
    metric_lines = [*READ, "epoch:  3, train_loss: 0.4100, test_accuracy: 97.12", ABSL + "epoch=2, loss=0.3"]
    for line in metric_lines:
        data = filler + line.encode() + b"\n"
        assert len(filler) in _logtext.lines_that_may_matter(data, len(data)), line
    for line in ("epoch 1 step 7 loss 0.3", "Epoch: [0]  [10/500]  loss: 6.9", "step 7 loss 0.3"):
        data = filler + line.encode() + b"\n"
        assert len(filler) not in _logtext.lines_that_may_matter(data, len(data)), line


def _steps(logged: str | None, name: str, values: list[float], every: int, pid: int) -> list[Event]:
    return [
        Step(
            t=float(i * every) + (0.5 if logged else 0.0),
            pid=pid,
            step=i * every,
            metrics={name: v},
            logged=logged,
        )
        for i, v in enumerate(values)
    ]


def test_a_printed_loss_is_the_curve_where_the_guard_measures_none() -> None:
    """A raw JAX loop: the guard measures gradient norms, the program prints its loss."""
    guard = _steps(None, "grad_norm", [1.0] * 10, 1, pid=7)
    printed = _steps(PRINTED, "loss", [0.7, 0.6, 0.5, math.nan, math.nan], 2, pid=6)
    record = RunRecord(events=guard + printed)
    assert [s.step for s in record.curve_steps if "loss" in s.metrics] == [0, 2, 4, 6, 8]
    (finding,) = nonfinite_loss(record)
    assert finding.code == "TRN001"
    assert finding.step == 6
    assert finding.evidence["last_finite_value"] == 0.5


def test_a_printed_loss_does_not_join_the_loss_a_guard_measures() -> None:
    """A PyTorch loop printing every step under the guard that reads every 10th: one curve, the
    guard's (two copies of it would count the steps twice); the healthy run stays quiet."""
    guard = _steps(None, "loss", [2.0 - 0.1 * i for i in range(10)], 10, pid=7)
    printed = _steps(PRINTED, "loss", [round(2.0 - 0.01 * i, 1) for i in range(100)], 1, pid=6)
    record = RunRecord(events=guard + printed)
    loss = [s for s in record.curve_steps if "loss" in s.metrics]
    assert all(s.logged is None for s in loss)
    assert len(loss) == 10
    assert nonfinite_loss(record) == []
