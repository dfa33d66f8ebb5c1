"""trainmedic.jax.guard: real optax steps under jit on CPU."""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import optax
import pytest

import trainmedic.jax
from trainmedic.registry import run_rules

from ..helpers import run_instrumented

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "breadth"
X = jax.random.normal(jax.random.PRNGKey(0), (128, 4))
Y = X @ jnp.arange(4.0)


def loss_fn(w: jax.Array) -> jax.Array:
    return jnp.mean((X @ w - Y) ** 2)


def train(tx, steps: int, *, poison_at: int | None = None) -> tuple[float, list]:
    before = len(trainmedic.jax.findings())
    w = jnp.zeros(4)
    state = tx.init(w)

    @jax.jit
    def step(w, state, poison):
        loss, grads = jax.value_and_grad(loss_fn)(w)
        grads = grads * poison  # 1.0, or NaN on the poisoned step
        updates, state = tx.update(grads, state, w, value=loss)
        return optax.apply_updates(w, updates), state, loss

    for i in range(steps):
        poison = jnp.float32(jnp.nan if i + 1 == poison_at else 1.0)
        w, state, loss = step(w, state, poison)
    jax.effects_barrier()  # let pending debug callbacks run
    return float(loss), trainmedic.jax.findings()[before:]


def test_healthy_training_is_quiet_and_updates_are_unchanged() -> None:
    guarded_loss, found = train(trainmedic.jax.guard(optax.adam(0.1), every=5, echo=False), 40)
    bare_loss, _ = train(optax.adam(0.1), 40)
    assert found == []
    assert guarded_loss == pytest.approx(bare_loss, rel=1e-6)


def test_divergence_raises_trn007_then_trn001_at_their_steps() -> None:
    _, found = train(trainmedic.jax.guard(optax.sgd(1.5), every=10, echo=False), 60)
    assert [f.code for f in found] == ["TRN007", "TRN001"]
    explosion, nonfinite = found
    assert explosion.evidence["factor"] > 1e3
    assert nonfinite.step is not None
    assert nonfinite.step > explosion.step


def test_a_nan_between_samples_is_caught_at_its_own_step() -> None:
    _, found = train(trainmedic.jax.guard(optax.sgd(0.01), every=1000, echo=False), 20, poison_at=7)
    assert [f.code for f in found][:1] == ["TRN007"]
    assert found[0].step == 7  # not at the next sampled step


def test_every_must_be_positive() -> None:
    with pytest.raises(ValueError, match="every"):
        trainmedic.jax.guard(optax.sgd(0.1), every=0)


@pytest.mark.slow
def test_examples_in_a_real_child(tmp_path: Path) -> None:
    bad = run_instrumented(
        [sys.executable, str(EXAMPLES / "jax_diverging.py")], tmp_path / "bad", timeout=180
    )
    assert bad.result.returncode == 0, bad.result.stderr
    # the loss rises far above its start before it overflows: divergence, then non-finite
    assert sorted(f.code for f in run_rules(bad.record)) == ["TRN001", "TRN002", "TRN007"]
    assert bad.record.steps  # the sampled steps arrived as Step events
    good = run_instrumented(
        [sys.executable, str(EXAMPLES / "jax_healthy.py")], tmp_path / "good", timeout=180
    )
    assert good.result.returncode == 0, good.result.stderr
    assert run_rules(good.record) == []
