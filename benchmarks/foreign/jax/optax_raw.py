"""optax's own "getting started" loop, as its README publishes it: no Flax, no trainer.

As there: a two-layer perceptron in plain `jax.numpy` learns the parity of a random byte given
its 8 bits, `optax.adam(learning_rate=1e-2)`, one jitted `step(params, opt_state, batch, labels)`
that calls `jax.value_and_grad`, `optimizer.update` and `optax.apply_updates`, and a print of
the loss every 100 steps (`step 0, loss: 0.69`). No code of trainmedic in it.

Data made in the script, as in the README (1,000 batches of 5 random bytes; `--steps` fewer).

Bug `lr-nan`: the loss written by hand, `-(y log p + (1 - y) log(1 - p))` on `sigmoid(logits)`,
in place of `optax.sigmoid_binary_cross_entropy` (which works on the logits): once the net is
confident, `p` rounds to exactly 1.0 in float32, `log(1 - p)` is -inf and its gradient NaN, so
the parameters are NaN from that step on. The guard inside the jitted `optimizer.update` sees
the first non-finite gradient: TRN007 at its step.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
import optax

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["lr-nan"], default=None)
parser.add_argument("--steps", type=int, default=1_000)
ARGS = parser.parse_args()
BUG = ARGS.bug

BATCH_SIZE = 5
NUM_TRAIN_STEPS = ARGS.steps
RAW_TRAINING_DATA = np.random.default_rng(0).integers(255, size=(NUM_TRAIN_STEPS, BATCH_SIZE, 1))

TRAINING_DATA = np.unpackbits(RAW_TRAINING_DATA.astype(np.uint8), axis=-1)
LABELS = jax.nn.one_hot(RAW_TRAINING_DATA % 2, 2).astype(jnp.float32).reshape(NUM_TRAIN_STEPS, BATCH_SIZE, 2)

initial_params = {
    "hidden": jax.random.normal(shape=[8, 32], key=jax.random.PRNGKey(0)),
    "output": jax.random.normal(shape=[32, 2], key=jax.random.PRNGKey(1)),
}


def net(x: jnp.ndarray, params: optax.Params) -> jnp.ndarray:
    x = jnp.dot(x, params["hidden"])
    x = jax.nn.relu(x)
    x = jnp.dot(x, params["output"])
    return x  # noqa: RET504  (as the README writes it)


def loss(params: optax.Params, batch: jnp.ndarray, labels: jnp.ndarray) -> jnp.ndarray:
    y_hat = net(batch, params)
    if BUG == "lr-nan":
        p = jax.nn.sigmoid(y_hat)
        loss_value = -(labels * jnp.log(p) + (1 - labels) * jnp.log(1 - p)).sum(axis=-1)
    else:
        # optax also provides a number of common loss functions.
        loss_value = optax.sigmoid_binary_cross_entropy(y_hat, labels).sum(axis=-1)
    return loss_value.mean()


def fit(params: optax.Params, optimizer: optax.GradientTransformation) -> optax.Params:
    opt_state = optimizer.init(params)

    @jax.jit
    def step(params, opt_state, batch, labels):
        loss_value, grads = jax.value_and_grad(loss)(params, batch, labels)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        return params, opt_state, loss_value

    for i, (batch, labels) in enumerate(zip(TRAINING_DATA, LABELS, strict=True)):
        params, opt_state, loss_value = step(params, opt_state, batch, labels)
        if i % 100 == 0:
            print(f"step {i}, loss: {loss_value}")

    return params


# Finally, we can fit our parametrized function using the Adam optimizer provided by optax.
optimizer = optax.adam(learning_rate=1e-2)
params = fit(initial_params, optimizer)
