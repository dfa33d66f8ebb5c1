"""TRN004 `overfitting`: validation loss rises while the training loss keeps falling.

Collectors: whatever sends a training and a validation loss as events (a Keras history with
`val_loss`, the HF Trainer's evaluations, a TensorBoard log; `evidence/curves.py` tells them
apart). Each validation point is paired with the training loss over the same stretch (the
same epoch, or the steps since the previous validation); the turn is the validation minimum.

The boosters (`trainmedic._boosting`: XGBoost, LightGBM, CatBoost) measure their validation
metric per round and send a `boosting_rounds` observation at the end of training (best
round, last value, early stopping or not): `overfitting_without_early_stopping` words TRN004 in their
terms, unless TRN009 already says that eval set is the training data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainmedic.events import Epoch, Event
from trainmedic.evidence.curves import Curve, loss_curves, noise_sigma, rolling_median
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules.trn import trn009_eval_set_is_train as trn009

if TYPE_CHECKING:
    from trainmedic.evidence.curves import FloatArray

# -- thresholds (documented in docs/diagnose.md) ---------------------------------------------
#: TRN004 needs this many validation points, and this many after the turn.
OVERFIT_MIN_POINTS = 5
OVERFIT_MIN_AFTER_TURN = 2
#: TRN004: validation must rise above its minimum by OVERFIT_REL x |minimum| and
#: OVERFIT_NOISE x its noise, while training loss falls by TRAIN_FALL_REL x its level.
OVERFIT_REL = 0.10
OVERFIT_NOISE = 3.0
TRAIN_FALL_REL = 0.01
#: The boosters' observation at the end of training: the validation metric's best and last round.
ROUNDS_OBSERVATION = "boosting_rounds"
#: Boosting without early stopping: enough rounds, the best one early enough (at most
#: BEST_BEFORE_SHARE of the rounds, MIN_WASTED_ROUNDS before the last), the last one worse by
#: MIN_RELATIVE_WORSENING of the best value.
MIN_ROUNDS = 20
MIN_WASTED_ROUNDS = 10
BEST_BEFORE_SHARE = 0.8
MIN_RELATIVE_WORSENING = 0.01


def _example() -> list[Event]:
    """val_loss falls to 0.52 at epoch 6, then rises to 0.61 by epoch 10 and 0.80 by 15, while
    the training loss falls from 0.9 to 0.05."""
    val = [0.95, 0.8, 0.68, 0.6, 0.55, 0.52, 0.53, 0.55, 0.58, 0.61, 0.65, 0.69, 0.73, 0.77, 0.8]
    train = [0.9 - (0.9 - 0.05) * i / 14 for i in range(15)]
    return [
        Epoch(t=float(i), pid=100, epoch=i, metrics={"loss": t, "val_loss": v})
        for i, (t, v) in enumerate(zip(train, val, strict=True))
    ]


SPEC = FindingSpec(
    code="TRN004",
    slug="overfitting",
    severity=Severity.WARNING,
    title="Overfitting: validation loss rises while training loss falls",
    what=(
        "Validation loss rises (by more than 10% and 3x its noise) after its minimum while the "
        "training loss keeps falling: a growing gap. The turning epoch is given."
    ),
    why="Every epoch after the turn makes the model worse on unseen data.",
    example="val_loss 0.52 at epoch 6, 0.61 at 10, 0.80 at 15; loss 0.30 -> 0.05.",
    fix=(
        "Keep the checkpoint of the turning epoch (early stopping on val_loss), add "
        "regularisation or data augmentation, or get more data."
    ),
    decided_in=("run events", "torch guard", "boosters"),
    example_input=_example,
)


def overfitting(record: RunRecord) -> list[Finding]:
    """TRN004: validation loss turned up while training loss kept falling; gives the turn."""
    train, val = loss_curves(record)
    for v in val:
        for t in train:
            paired = _pair(t.finite_prefix(), v.finite_prefix())
            if paired is None or len(paired.x) < OVERFIT_MIN_POINTS:
                continue
            found = _overfit(paired, t.name, v.name)
            return [found] if found else []
    return []


@dataclass(frozen=True, slots=True)
class _Paired:
    """Validation points with the training loss over the same stretch of training."""

    x: FloatArray
    val: FloatArray
    train: FloatArray
    per: str
    epoch: list[int | None]


def _overfit(p: _Paired, train_name: str, val_name: str) -> Finding | None:
    import numpy as np

    n = len(p.x)
    smooth = rolling_median(p.val, 3 if n >= 7 else 1)
    turn = int(np.argmin(smooth))
    if n - 1 - turn < OVERFIT_MIN_AFTER_TURN:
        return None
    v_min = float(smooth[turn])
    v_end = float(np.median(p.val[max(turn + 1, n - 3) :]))
    t_turn = float(p.train[turn])
    t_end = float(np.median(p.train[max(turn + 1, n - 3) :]))
    sigma = noise_sigma(p.val)
    threshold = max(OVERFIT_REL * abs(v_min), OVERFIT_NOISE * sigma)
    if v_end - v_min <= threshold or t_turn - t_end <= TRAIN_FALL_REL * abs(t_turn):
        return None
    turn_epoch = p.epoch[turn]
    turn_step = int(p.x[turn]) if p.per == "step" else None
    at_turn = _label(p, turn)
    evidence: dict[str, object] = {
        "metric": val_name,
        "train_metric": train_name,
        "turn_epoch": None if turn_epoch is None else turn_epoch + 1,
        f"turn_{p.per}": int(p.x[turn]) + (1 if p.per == "epoch" else 0),
        "val_at_turn": v_min,
        "val_end": v_end,
        "train_at_turn": t_turn,
        "train_end": t_end,
        "gap_at_turn": v_min - t_turn,
        "gap_end": v_end - t_end,
        "threshold": threshold,
        "points": n,
    }
    message = (
        f"Validation loss `{val_name}` turned at {at_turn} ({v_min:.4g}) and rose to {v_end:.4g} "
        f"by {_label(p, n - 1)} while training loss `{train_name}` fell from {t_turn:.4g} to {t_end:.4g}"
    )
    fix = (
        f"Keep the checkpoint of {at_turn} (early stopping on `{val_name}` with restore_best_weights / "
        "load_best_model_at_end); add regularisation or data augmentation, or get more data."
    )
    epoch = None if turn_epoch is None else turn_epoch + 1  # 1-based, as in the message
    return SPEC.finding(message, evidence=evidence, fix=fix, step=turn_step, epoch=epoch)


def _pair(t: Curve, v: Curve) -> _Paired | None:
    """Line up the training loss with each validation point (same epoch, or the steps since the last one)."""
    import numpy as np

    if v.per == "epoch" and t.per == "epoch":
        index = {int(x): float(y) for x, y in zip(t.x, t.y, strict=True)}
        keep = [i for i, x in enumerate(v.x) if int(x) in index]
        train = np.array([index[int(v.x[i])] for i in keep])
        return _Paired(v.x[keep], v.y[keep], train, "epoch", [int(v.x[i]) for i in keep])
    if v.per == "epoch" and t.epoch is not None:
        groups: dict[int, list[float]] = {}
        for e, y in zip(t.epoch, t.y, strict=True):
            if np.isfinite(e):
                groups.setdefault(int(e), []).append(float(y))
        keep = [i for i, x in enumerate(v.x) if int(x) in groups]
        train = np.array([float(np.median(groups[int(v.x[i])])) for i in keep])
        return _Paired(v.x[keep], v.y[keep], train, "epoch", [int(v.x[i]) for i in keep])
    if v.per == "step" and t.per == "step":
        bounds = np.searchsorted(t.x, v.x, side="right")
        starts = np.concatenate([[0], bounds[:-1]])
        keep = [i for i in range(len(v.x)) if bounds[i] > starts[i]]
        train = np.array([float(np.median(t.y[starts[i] : bounds[i]])) for i in keep])
        return _Paired(v.x[keep], v.y[keep], train, "step", [v.epoch_at(i) for i in keep])
    return None


def _label(p: _Paired, i: int) -> str:
    epoch = p.epoch[i]
    if p.per == "epoch" or epoch is None:
        return f"epoch {epoch + 1}" if epoch is not None else f"step {int(p.x[i])}"
    return f"step {int(p.x[i])} (epoch {epoch + 1})"


# -- the boosters' rounds -----------------------------------------------------------------------
def overfitting_without_early_stopping(record: RunRecord) -> list[Finding]:
    """The validation metric was best long before the last round and no early stopping kept it."""
    found: list[Finding] = []
    # TRN009 already says what is wrong with a leaky eval set of the same training call
    leaky = {
        (f.pid, f.evidence.get("call"), f.evidence.get("eval_name")) for f in trn009.eval_set_is_train(record)
    }
    for obs in record.guard_observations:
        if obs.check != ROUNDS_OBSERVATION:
            continue
        pid, data = obs.pid, obs.data
        if data.get("early_stopping") or (pid, data.get("call"), data.get("eval_name")) in leaky:
            continue
        rounds, best = int(data.get("rounds_run") or 0), int(data.get("best_round") or 0)
        best_value, last_value = data.get("best_value"), data.get("last_value")
        if not isinstance(best_value, (int, float)) or not isinstance(last_value, (int, float)):
            continue
        if rounds < MIN_ROUNDS or best > BEST_BEFORE_SHARE * rounds or rounds - best < MIN_WASTED_ROUNDS:
            continue
        worse = (best_value - last_value) if data.get("higher_is_better") else (last_value - best_value)
        if worse < MIN_RELATIVE_WORSENING * max(abs(best_value), 1e-12):
            continue
        metric, name = data.get("metric"), data.get("eval_name")
        found.append(
            SPEC.finding(
                f"{data.get('framework', 'Boosting')} {name} {metric} was best at round {best} "
                f"({best_value:.4g}) and ended at {last_value:.4g} after {rounds} rounds, with no early stopping",
                evidence=dict(data),
                fix=(
                    f"Stop on the validation set (early_stopping_rounds=~{max(10, rounds // 10)}), which keeps "
                    f"the model of its best round (here {best}); or train about {best} rounds."
                ),
                epoch=best,
                pid=pid,
            )
        )
    return found


RULES: tuple[Rule, ...] = (overfitting, overfitting_without_early_stopping)
#: Which rules a place applies: a booster's guard reads its rounds, the PyTorch guard the loss curves.
RULES_AT: dict[str, tuple[Rule, ...]] = {
    "boosters": (overfitting_without_early_stopping,),
    "torch guard": (overfitting,),
}
