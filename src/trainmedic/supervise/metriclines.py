"""Printed metric lines as metrics: epoch summaries (`epoch:  3, train_loss: 0.4100, test_accuracy:
97.12`) and per-step lines (`step 100, loss: 0.53`).

JAX programs have no trainer that hands its logs over: they print (or `absl.logging.info`) one
summary line per epoch, as flax's own examples do (`'epoch:% 3d, train_loss: %.4f, ...'`), or a
line every few steps, as optax's README loop does (`f"step {i}, loss: {loss_value}"`). An epoch
line becomes an `Epoch` event with its metrics, a step line a `Step` event marked as a logged
stream of its own (`Step.logged == PRINTED`), so the curve rules judge the run from its output.

A step line is `step N`, `step: N` or `step=N` (a whole number) followed by nothing but
`name: number` pairs, at least one of them a loss; the same prefixes may come before it. The
values are those the program printed at that step, so the step is the printed one.

The line must be nothing but `name: number` (or `name=number`) pairs separated by commas or `|`,
the first `epoch` with a whole number, and at least one other name a loss; an absl or `logging`
prefix (`I1207 13:45:00.123456 140 train.py:80] `, `INFO:absl:`) may come before it. A
progress line ("Train Epoch: 3 [640/60000]  Loss: 0.2"), a sentence ("epoch 3: loss 0.41") or a
dict (the HF Trainer's, read in process) is not one: misreading ordinary output would put a curve
that is not the loss under the rules.
"""

from __future__ import annotations

import re

from trainmedic.logged import PRINTED

__all__ = ["PRINTED", "epoch_metrics", "step_metrics"]

_PREFIX = re.compile(
    r"^(?:[IWEFD]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+\s+\S+:\d+\]\s*|(?:DEBUG|INFO|WARNING):[\w.]+:\s*)"
)
_PAIR = re.compile(
    r"^([A-Za-z][\w./-]*(?: [A-Za-z][\w./-]*)?)\s*[:=]\s*"
    r"([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|(?i:nan|inf|infinity)))%?$"
)
_SEPARATOR = re.compile(r"\s*[,|]\s*")
_STEP = re.compile(r"^[sS]tep(?:\s*[:=]\s*|\s+)(\d+)$")


def _pairs(line: str) -> list[str] | None:
    """The comma- or `|`-separated parts of a line less its log prefix, else None."""
    body = _PREFIX.sub("", line.strip(), count=1).strip()
    parts = _SEPARATOR.split(body)
    return parts if len(parts) >= 2 else None


def _is_loss(name: str) -> bool:
    return name.lower().replace(" ", "_").endswith("loss")


def step_metrics(line: str) -> tuple[int, dict[str, float]] | None:
    """(the printed step number, its metrics) of a per-step metric line, else None."""
    if "tep" not in line:  # most lines: a few `in` tests
        return None
    if "oss" not in line and "OSS" not in line:
        return None
    parts = _pairs(line)
    if parts is None:
        return None
    step = _STEP.match(parts[0])
    if step is None:
        return None
    pairs = [_PAIR.match(part) for part in parts[1:]]
    if not all(pairs):
        return None
    metrics = {m.group(1): float(m.group(2)) for m in pairs if m is not None}
    if not any(_is_loss(name) for name in metrics):
        return None
    return int(step.group(1)), metrics


def epoch_metrics(line: str) -> tuple[int, dict[str, float]] | None:
    """(the printed epoch number, its metrics) of an epoch summary line, else None."""
    if "poch" not in line or ("oss" not in line and "OSS" not in line):  # most lines: two `in` tests
        return None
    body = _PREFIX.sub("", line.strip(), count=1)
    pairs = [_PAIR.match(part) for part in _SEPARATOR.split(body.strip())]
    if len(pairs) < 2 or not all(pairs):
        return None
    first, *rest = [(m.group(1), m.group(2)) for m in pairs if m is not None]
    if first[0].lower() != "epoch" or not first[1].isdigit():
        return None
    metrics = {name: float(value) for name, value in rest}
    if not any(_is_loss(name) for name in metrics):
        return None
    return int(first[1]), metrics
