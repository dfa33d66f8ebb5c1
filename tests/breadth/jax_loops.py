"""Three JAX training loops as users write them, with no trainmedic code: run by
`test_jax_run.py` under the boot module, as `trainmedic run` runs a script.

1. Flax Linen, healthy: `TrainState.create` with `optax.inject_hyperparams(optax.adam)`, 30 jitted
   steps; the script reads `state.opt_state.hyperparams` as written for the bare optimizer.
2. Flax Linen, `optax.MultiSteps` around SGD, the gradients of step 7 poisoned with NaN.
3. Flax NNX, `nnx.Optimizer(...).update(model, grads)`, the loss and gradients of step 5 NaN.

Each scalar the script reports goes through `tensorboardX.SummaryWriter.add_scalar` as well.
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import optax
import tensorboardX
from flax import linen as nn
from flax import nnx
from flax.training import train_state

X = jax.random.normal(jax.random.PRNGKey(0), (64, 4))
Y = X @ jnp.arange(4.0)
writer = tensorboardX.SummaryWriter(sys.argv[1])


def linen(tx, steps: int, poison_at: int | None, seed: int) -> train_state.TrainState:
    model = nn.Dense(1)
    state = train_state.TrainState.create(
        apply_fn=model.apply, params=model.init(jax.random.PRNGKey(seed), X), tx=tx
    )

    @jax.jit
    def step(state, poison):
        def loss_fn(params):
            return jnp.mean((state.apply_fn(params, X)[:, 0] - Y) ** 2)

        loss, grads = jax.value_and_grad(loss_fn)(state.params)
        grads = jax.tree.map(lambda g: g * poison, grads)
        return state.apply_gradients(grads=grads), loss

    for i in range(1, steps + 1):
        state, loss = step(state, jnp.float32(jnp.nan if i == poison_at else 1.0))
        writer.add_scalar("train/loss", float(loss), i)
    return state


state = linen(optax.inject_hyperparams(optax.adam)(learning_rate=0.05), 30, None, 1)
print("learning rate", float(state.opt_state.hyperparams["learning_rate"]))
linen(optax.MultiSteps(optax.sgd(0.01), every_k_schedule=2), 12, 7, 2)


class Net(nnx.Module):
    def __init__(self, rngs: nnx.Rngs) -> None:
        self.dense = nnx.Linear(4, 1, rngs=rngs)

    def __call__(self, x):
        return self.dense(x)[:, 0]


net = Net(nnx.Rngs(0))
optimizer = nnx.Optimizer(net, optax.sgd(0.01), wrt=nnx.Param)


@nnx.jit
def nnx_step(net, optimizer, scale):
    loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(X) - Y) ** 2) * scale)(net)
    optimizer.update(net, grads)
    return loss


for i in range(1, 11):
    nnx_step(net, optimizer, jnp.float32(jnp.nan if i == 5 else 1.0))
jax.effects_barrier()
writer.close()
print("done")
