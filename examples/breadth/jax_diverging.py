"""JAX + optax, diverging: linear regression with a learning rate far too high.

Run: trainmedic run -- python examples/breadth/jax_diverging.py
Expect: TRN007 (gradient norm explodes), TRN002 (the loss climbs far above its start) and
TRN001 (loss becomes inf/NaN), each at its step.
"""

import jax
import jax.numpy as jnp
import optax

import trainmedic.jax

X = jax.random.normal(jax.random.PRNGKey(0), (256, 8))
y = X @ jnp.arange(8.0)


def loss_fn(w):
    return jnp.mean((X @ w - y) ** 2)


tx = trainmedic.jax.guard(optax.sgd(1.5), every=10)
w = jnp.zeros(8)
state = tx.init(w)


@jax.jit
def step(w, state):
    loss, grads = jax.value_and_grad(loss_fn)(w)
    updates, state = tx.update(grads, state, w, value=loss)
    return optax.apply_updates(w, updates), state, loss


for _ in range(60):
    w, state, loss = step(w, state)
print("final loss", float(loss))
