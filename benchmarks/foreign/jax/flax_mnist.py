"""An MNIST-style CNN in the style of flax's `examples/mnist` (Linen, `TrainState`, absl).

As there: a small CNN, `optax.sgd` with momentum, `TrainState.create`, one jitted function that
computes the gradients, loss and accuracy of a batch and another that applies them
(`state.apply_gradients`), a shuffled permutation of the training set each epoch, and one
`logging.info('epoch:% 3d, train_loss: %.4f, ...')` line per epoch (written through
`flax.metrics.tensorboard` as well when `--workdir` is given). No code of trainmedic in it.

Data offline: scikit-learn's bundled 8x8 digits (1,797 images), upscaled to 16x16, split 80/20.
4 epochs of batches of 64 (22 steps an epoch).

Bug `lr-nan`: `--learning_rate=1e8` where 1e-1 was meant (a sign lost on the command line): the
loss is 2.28, then 1e29, then NaN from step 3 on: TRN007 at step 2 (the gradient norm 1e16 times
its start, the update already infinite) and TRN001 (the epoch's NaN loss).
Bug `shuffled-labels`: the training labels are permuted (a join on the wrong key): the loss
sits at chance, ln 10 = 2.303: TRN003.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from absl import app, flags, logging
from flax import linen as nn
from flax.training import train_state
from sklearn.datasets import load_digits

FLAGS = flags.DEFINE_string("workdir", None, "Directory for the TensorBoard summaries (optional).")
BUG = flags.DEFINE_enum("bug", None, ["lr-nan", "shuffled-labels"], "A realistic bug to plant.")
EPOCHS = flags.DEFINE_integer("epochs", 4, "Training epochs.")


def get_config() -> ml_collections.ConfigDict:
    """Hyperparameters, as flax's configs/default.py gives them."""
    config = ml_collections.ConfigDict()
    config.learning_rate = 0.05
    config.momentum = 0.9
    config.batch_size = 64
    config.num_epochs = 4
    return config


class CNN(nn.Module):
    """A small CNN."""

    @nn.compact
    def __call__(self, x):
        x = nn.Conv(features=16, kernel_size=(3, 3))(x)
        x = nn.relu(x)
        x = nn.avg_pool(x, window_shape=(2, 2), strides=(2, 2))
        x = nn.Conv(features=32, kernel_size=(3, 3))(x)
        x = nn.relu(x)
        x = nn.avg_pool(x, window_shape=(2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))  # flatten
        x = nn.Dense(features=64)(x)
        x = nn.relu(x)
        return nn.Dense(features=10)(x)


@jax.jit
def apply_model(state, images, labels):
    """Computes gradients, loss and accuracy for a single batch."""

    def loss_fn(params):
        logits = state.apply_fn({"params": params}, images)
        one_hot = jax.nn.one_hot(labels, 10)
        loss = jnp.mean(optax.softmax_cross_entropy(logits=logits, labels=one_hot))
        return loss, logits

    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
    (loss, logits), grads = grad_fn(state.params)
    accuracy = jnp.mean(jnp.argmax(logits, -1) == labels)
    return grads, loss, accuracy


@jax.jit
def update_model(state, grads):
    return state.apply_gradients(grads=grads)


def train_epoch(state, train_ds, batch_size, rng):
    """Train for a single epoch."""
    train_ds_size = len(train_ds["image"])
    steps_per_epoch = train_ds_size // batch_size

    perms = jax.random.permutation(rng, len(train_ds["image"]))
    perms = perms[: steps_per_epoch * batch_size]  # skip incomplete batch
    perms = perms.reshape((steps_per_epoch, batch_size))

    epoch_loss = []
    epoch_accuracy = []

    for perm in perms:
        batch_images = train_ds["image"][perm, ...]
        batch_labels = train_ds["label"][perm, ...]
        grads, loss, accuracy = apply_model(state, batch_images, batch_labels)
        state = update_model(state, grads)
        epoch_loss.append(loss)
        epoch_accuracy.append(accuracy)
    train_loss = np.mean(epoch_loss)
    train_accuracy = np.mean(epoch_accuracy)
    return state, train_loss, train_accuracy


def get_datasets(shuffle_labels: bool):
    """The 8x8 digits, upscaled to 16x16 and split 80/20, in memory."""
    digits = load_digits()
    images = np.kron(digits.images / 16.0, np.ones((2, 2)))[..., None].astype(np.float32)
    labels = digits.target.astype(np.int32)
    order = np.random.default_rng(0).permutation(len(labels))
    cut = int(0.8 * len(labels))
    train_ds = {"image": jnp.asarray(images[order[:cut]]), "label": labels[order[:cut]]}
    test_ds = {"image": jnp.asarray(images[order[cut:]]), "label": labels[order[cut:]]}
    if shuffle_labels:
        train_ds["label"] = np.random.default_rng(1).permutation(train_ds["label"])
    train_ds["label"] = jnp.asarray(train_ds["label"])
    test_ds["label"] = jnp.asarray(test_ds["label"])
    return train_ds, test_ds


def create_train_state(rng, config):
    """Creates initial `TrainState`."""
    cnn = CNN()
    params = cnn.init(rng, jnp.ones([1, 16, 16, 1]))["params"]
    tx = optax.sgd(config.learning_rate, config.momentum)
    return train_state.TrainState.create(apply_fn=cnn.apply, params=params, tx=tx)


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str | None) -> train_state.TrainState:
    """Execute model training and evaluation loop."""
    train_ds, test_ds = get_datasets(shuffle_labels=BUG.value == "shuffled-labels")
    rng = jax.random.PRNGKey(0)

    summary_writer = None
    if workdir is not None:
        from flax.metrics import tensorboard

        summary_writer = tensorboard.SummaryWriter(workdir)
        summary_writer.hparams(dict(config))

    rng, init_rng = jax.random.split(rng)
    state = create_train_state(init_rng, config)

    for epoch in range(1, config.num_epochs + 1):
        rng, input_rng = jax.random.split(rng)
        state, train_loss, train_accuracy = train_epoch(state, train_ds, config.batch_size, input_rng)
        _, test_loss, test_accuracy = apply_model(state, test_ds["image"], test_ds["label"])

        logging.info(  # flax's own line, as written there
            "epoch:% 3d, train_loss: %.4f, train_accuracy: %.2f, test_loss: %.4f, test_accuracy: %.2f"  # noqa: UP031
            % (epoch, train_loss, train_accuracy * 100, test_loss, test_accuracy * 100)
        )

        if summary_writer is not None:
            summary_writer.scalar("train_loss", train_loss, epoch)
            summary_writer.scalar("train_accuracy", train_accuracy, epoch)
            summary_writer.scalar("test_loss", test_loss, epoch)
            summary_writer.scalar("test_accuracy", test_accuracy, epoch)

    if summary_writer is not None:
        summary_writer.flush()
    return state


def main(argv):
    if len(argv) > 1:
        raise app.UsageError("Too many command-line arguments.")
    config = get_config()
    config.num_epochs = EPOCHS.value
    if BUG.value == "lr-nan":
        config.learning_rate = 1e8
    logging.info(
        "JAX process: %d / %d, local devices: %r",
        jax.process_index(),
        jax.process_count(),
        jax.local_devices(),
    )
    train_and_evaluate(config, FLAGS.value)


if __name__ == "__main__":
    app.run(main)
