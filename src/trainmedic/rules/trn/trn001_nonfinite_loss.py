"""TRN001 `nonfinite-loss`: the loss (or a metric used as the loss) became NaN or Inf.

Collectors: every path that sees a loss curve sends it as `Epoch`/`Step`/`Metric` events (a
Keras history, the guards' sampled steps, a TensorBoard or HF log read by `diagnose`);
`nonfinite_loss` finds its first non-finite point (see `evidence/curves.py` for which metric
is "the loss"). Two guards decide it live, at the step, and raise the finding in process:
the PyTorch guard (`trainmedic.torch._losses`) reads back every kept loss and hands the
first non-finite one to `judge_guard` (with `on_nonfinite="stop"` before the update), with
what that step's batch held (`trainmedic.torch._batches` reads its samples again from the
dataset, by the batch's indices, only then): a NaN/Inf in the data is named as the cause,
rows and columns, and TRN007 leaves the non-finite gradient it caused to this finding. The
JAX guard (`trainmedic.jax`) hands each reported step's loss to `judge_jax`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from trainmedic.events import Epoch, Event
from trainmedic.evidence.curves import Curve, at, loss_curves, nonfinite_ranks, where
from trainmedic.findings import Finding, FindingSpec, Severity, epoch_number
from trainmedic.record import Rule, RunRecord


def _epochs(*losses: float) -> list[Event]:
    """One `Epoch` event per training loss, as a Keras history or a trainer's epoch log gives them."""
    return [Epoch(t=float(i), pid=100, epoch=i, metrics={"loss": loss}) for i, loss in enumerate(losses)]


def _example() -> list[Event]:
    """A learning rate of 10 on an MLP: loss 2.3, 8.1, 1e12, inf, nan."""
    return _epochs(2.3, 8.1, 1e12, math.inf, math.nan)


SPEC = FindingSpec(
    code="TRN001",
    slug="nonfinite-loss",
    severity=Severity.ERROR,
    title="Loss became NaN or Inf",
    what=(
        "The loss (or a metric used as the loss, training or validation) became NaN or Inf; the "
        "first step and epoch are given, with the last finite value before it. The PyTorch "
        "guard reads that step's samples again from the DataLoader's dataset: when they hold "
        "NaN/Inf, the data is named as the cause (dataset rows, index in the batch, feature "
        "columns) and the non-finite gradient it caused is not also reported as TRN007."
    ),
    why=(
        "Every update after that step is garbage: the weights are NaN and the run is lost. Keras "
        "and the HF Trainer keep going and log NaN for every later epoch unless told to stop."
    ),
    example=(
        "A learning rate of 10 on an MLP: loss 2.3, 8.1, 1e12, inf, nan. `trainmedic diagnose "
        "history.json` names the epoch; on a TensorBoard log of every step, the step."
    ),
    fix=(
        "Lower the learning rate or add warm-up, clip gradients, check the inputs of that "
        "batch for NaN/Inf, use bf16 instead of fp16 or a loss scaler."
    ),
    decided_in=("run events", "torch guard"),
    example_input=_example,
)
#: The cause named in the evidence when the batch's own data held NaN/Inf.
INPUT_CAUSE = "non-finite inputs"
INPUT_FIX = (
    "The data is the cause, not the learning rate: drop or impute the rows with NaN/Inf before "
    "training (pandas `dropna`/`fillna`, scikit-learn `SimpleImputer` fitted on the training "
    "split), or fix the transform that produces them; `trainmedic check data TRAIN.csv` lists "
    "the columns with missing values of a table."
)
FINITE_INPUTS_FIX = (
    "Lower the learning rate or add warm-up, clip gradients, use bf16 instead of fp16 or a "
    "loss scaler (the batch's samples, as the dataset gives them, were finite)."
)


# -- the loss curves of a run -----------------------------------------------------------------
def nonfinite_loss(record: RunRecord) -> list[Finding]:
    """TRN001: the first NaN/Inf of any loss curve (training curves win ties; steps beat epochs).

    Where several ranks log the curve, the finding names the rank(s) whose own loss was
    non-finite at that point (the merged curve, their mean, is NaN when any one of them is).
    """
    import numpy as np

    found = _first_nonfinite(*loss_curves(record, prefer="step"))
    if found is None:  # the step curve can be a sample: the per-epoch reports may hold it
        found = _first_nonfinite(*loss_curves(record, prefer="epoch"))
    if found is None:
        return []
    c, i, affected = found
    step, epoch = where(c, i)
    value = "NaN" if np.isnan(c.y[i]) else ("+Inf" if c.y[i] > 0 else "-Inf")
    evidence: dict[str, object] = {
        "metric": c.name,
        "value": value,
        c.per: int(c.x[i]) + (1 if c.per == "epoch" else 0),
        "nonfinite_points": int(np.count_nonzero(~np.isfinite(c.y))),
        "points": len(c),
        "metrics_affected": affected,
    }
    last = ""
    if i > 0:
        evidence["last_finite_value"] = float(c.y[i - 1])
        evidence[f"last_finite_{c.per}"] = int(c.x[i - 1]) + (1 if c.per == "epoch" else 0)
        last = f"; last finite value {c.y[i - 1]:.4g} at {at(c, i - 1)}"
    if epoch is not None and c.per == "step":
        evidence["epoch"] = epoch
    ranks = nonfinite_ranks(record, c, float(c.x[i]))
    on = ""
    if ranks:  # several ranks log it: name the ones that went non-finite first
        evidence["ranks"] = ranks
        on = f" on rank {ranks[0]}" if len(ranks) == 1 else f" on ranks {', '.join(map(str, ranks))}"
    message = f"Loss `{c.name}` became {value} at {at(c, i)}{on}{last}"
    rank = ranks[0] if len(ranks) == 1 else None
    return [SPEC.finding(message, evidence=evidence, step=step, epoch=epoch, rank=rank)]


def _first_nonfinite(train: list[Curve], val: list[Curve]) -> tuple[Curve, int, list[str]] | None:
    """(the curve, the index of its first NaN/Inf, the names of all curves with one), earliest first."""
    import numpy as np

    first: tuple[float, Curve, int] | None = None
    affected: list[str] = []
    for c in train + val:
        bad = np.flatnonzero(~np.isfinite(c.y))
        if not len(bad):
            continue
        affected.append(c.name)
        i = int(bad[0])
        if first is None or c.x[i] < first[0]:
            first = (float(c.x[i]), c, i)
    return None if first is None else (first[1], first[2], affected)


RULES: tuple[Rule, ...] = (nonfinite_loss,)
#: A batch without a supervised token has a loss of 0 / 0 = NaN by construction: TOR010 names
#: that cause and its fix; a NaN finding beside it would point at the learning rate.
EXPLAINED_BY = ("TOR010",)


# -- the PyTorch guard, live --------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class NonfiniteField:
    """One part of the samples (`sample[0]`, `sample['x']`, or `sample` itself) that held NaN/Inf.

    `columns` are the feature columns (the last axis of a 1-D or 2-D sample) that did; empty
    when a sample's part is a scalar or has more axes (an image).
    """

    field: str
    rows: tuple[int, ...]  # the dataset indices of the samples whose part held NaN/Inf
    columns: tuple[int, ...] = ()
    values: tuple[str, ...] = ()  # "nan", "+inf", "-inf"


@dataclass(frozen=True, slots=True)
class BatchInputs:
    """The samples of the step's batch, read again from the dataset by the batch's indices."""

    rows_read: int
    rows_in_batch: int
    fields: tuple[NonfiniteField, ...] = ()  # empty: every value read was finite
    positions: tuple[int, ...] = ()  # positions in the batch of the rows that held NaN/Inf

    @property
    def rows(self) -> list[int]:
        return sorted({row for f in self.fields for row in f.rows})


@dataclass(frozen=True, slots=True)
class GuardLoss:
    """The first non-finite loss the PyTorch guard read back, with what it knows of that step.

    `every` is how often the guard checks (its losses are all kept and read at the next
    check); `stopping` is `on_nonfinite="stop"`, which checks every step before the update.
    `inputs` is what the step's samples held, when they could be read again.
    """

    step: int
    loss: float
    last_finite_loss: float | None
    epoch: int | None
    every: int
    stopping: bool
    batch_indices: Sequence[int] = ()
    rank: int | None = None
    inputs: BatchInputs | None = None


def _guard_message(m: GuardLoss) -> str:
    message = f"Loss became {m.loss} at step {m.step}"
    message += f" (epoch {epoch_number(m.epoch)})" if m.epoch is not None else ""
    if m.inputs is not None and m.inputs.fields:
        message += f": the batch's data holds {_kinds(m.inputs)}, {_where(m.inputs)}"
    return message


def _kinds(inputs: BatchInputs) -> str:
    seen = {v for f in inputs.fields for v in f.values}
    return " and ".join(
        name for name, key in (("NaN", "nan"), ("+Inf", "+inf"), ("-Inf", "-inf")) if key in seen
    )


def _listed(values: Sequence[int], limit: int = 5) -> str:
    shown = ", ".join(str(v) for v in values[:limit])
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "")


def _where(inputs: BatchInputs) -> str:
    """'dataset row 200 (index 12 in the batch of 32), column 7 of sample[0]'."""
    rows = inputs.rows
    text = f"dataset row{'s' if len(rows) > 1 else ''} {_listed(rows)}"
    if inputs.positions:
        positions = _listed(list(inputs.positions))
        plural = "es" if len(inputs.positions) > 1 else ""
        text += f" (index{plural} {positions} in the batch of {inputs.rows_in_batch})"
    parts = []
    for f in inputs.fields:
        columns = (
            f"column{'s' if len(f.columns) > 1 else ''} {_listed(list(f.columns))} of " if f.columns else ""
        )
        parts.append(f"{columns}{f.field}")
    return f"{text}, {'; '.join(parts)}"


def judge_guard(m: GuardLoss) -> Finding | None:
    """TRN001 as the PyTorch guard raises it: at the step the loss first became NaN/Inf.

    When the step's samples, read again, hold NaN/Inf, the data is the cause: the message
    names the rows and columns and the fix is about the data, not the learning rate.
    """
    if math.isfinite(m.loss):
        return None
    evidence: dict[str, object] = {
        "step": m.step,
        "loss": m.loss,
        "last_finite_loss": m.last_finite_loss,
        "epoch": epoch_number(m.epoch),
        "checked": "every step"
        if m.stopping
        else f"every {m.every} steps (all losses kept, reported at most {m.every - 1} steps late)",
    }
    if m.batch_indices:
        evidence["batch_indices"] = list(m.batch_indices[:1024])
    fix = None
    if m.inputs is not None and m.inputs.fields:
        evidence["cause"] = INPUT_CAUSE
        evidence["nonfinite_inputs"] = {
            "rows": m.inputs.rows,
            "batch_positions": list(m.inputs.positions),
            "fields": [
                {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(f).items()}
                for f in m.inputs.fields
            ],
            "rows_read": m.inputs.rows_read,
            "rows_in_batch": m.inputs.rows_in_batch,
            "how": "the batch's samples read again from the dataset by its indices",
        }
        fix = INPUT_FIX
    elif m.inputs is not None:
        evidence["inputs"] = f"finite ({m.inputs.rows_read} rows of the batch read again)"
        fix = FINITE_INPUTS_FIX
    return SPEC.finding(
        _guard_message(m) + (": stopped before the update" if m.stopping else ""),
        evidence=evidence,
        fix=fix,
        step=m.step,
        epoch=epoch_number(m.epoch),
        rank=m.rank,
    )


def caused_by_inputs(finding: Finding) -> bool:
    """A TRN001 whose step's batch held NaN/Inf in its data (what TRN007 leaves to it)."""
    return finding.code == SPEC.code and finding.evidence.get("cause") == INPUT_CAUSE


def stopped_error(m: GuardLoss) -> str:
    """The text of the `NonFiniteLossError` that `on_nonfinite="stop"` raises."""
    return f"trainmedic: {_guard_message(m)}; stopped before the optimizer applied it (on_nonfinite='stop')"


# -- the JAX guard, live --------------------------------------------------------------------------
def judge_jax(step: int, loss: float, grad_norm: float, last_norms: Sequence[float]) -> Finding | None:
    """TRN001 as the JAX guard raises it, from a reported step's loss (`value=` of `tx.update`)."""
    if math.isfinite(loss):
        return None
    return SPEC.finding(
        f"The loss became {loss} at step {step}",
        evidence={"step": step, "loss": loss, "grad_norm": grad_norm, "last_finite_norms": list(last_norms)},
        step=step,
    )
