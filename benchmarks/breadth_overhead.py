"""Overhead of the breadth guards, measured side by side in one run (ratios, not absolute times).

    python benchmarks/breadth_overhead.py

XGBoost / LightGBM / CatBoost: fit with and without the guard (one thread, same data).
JAX: jitted optax steps with and without `trainmedic.jax.guard`, after compilation.
Each pair alternates bare/guarded `REPEATS` times and reports the ratio of the medians.
"""

from __future__ import annotations

import statistics
import time

import numpy as np
from sklearn.datasets import make_classification

REPEATS = 3
EVERY = 100  # trainmedic.jax.guard's default sampling period
X, y = make_classification(n_samples=5000, n_features=20, random_state=0)
X_train, y_train, X_val, y_val = X[:4000], y[:4000], X[4000:], y[4000:]


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def compare(name: str, bare, guarded) -> None:
    bare_times, guarded_times = [], []
    for _ in range(REPEATS):
        bare_times.append(timed(bare))
        guarded_times.append(timed(guarded))
    bare = statistics.median(bare_times)
    ratio = statistics.median(guarded_times) / bare
    print(f"{name:10s} guarded/bare = {ratio:.3f}  (median of {REPEATS}, bare {bare:.3f}s)")


def xgboost_pair() -> None:
    import xgboost as xgb

    import trainmedic.xgboost

    def fit(callbacks):
        model = xgb.XGBClassifier(n_estimators=200, max_depth=4, n_jobs=1, callbacks=callbacks)
        model.fit(X_train, y_train, eval_set=[(X_val, y_val)], verbose=False)

    compare("xgboost", lambda: fit(None), lambda: fit([trainmedic.xgboost.Guard(echo=False)]))


def lightgbm_pair() -> None:
    import lightgbm as lgb

    import trainmedic.lightgbm

    def fit(callbacks):
        model = lgb.LGBMClassifier(n_estimators=200, n_jobs=1, verbose=-1)
        model.fit(X_train, y_train, eval_X=(X_val,), eval_y=(y_val,), callbacks=callbacks)

    compare("lightgbm", lambda: fit([]), lambda: fit([trainmedic.lightgbm.Guard(echo=False)]))


def catboost_pair() -> None:
    import catboost

    import trainmedic.catboost

    def fit(callbacks):
        model = catboost.CatBoostClassifier(
            iterations=200, verbose=False, thread_count=1, allow_writing_files=False
        )
        model.fit(X_train, y_train, eval_set=(X_val, y_val), callbacks=callbacks)

    compare("catboost", lambda: fit(None), lambda: fit([trainmedic.catboost.Guard(echo=False)]))


def jax_pair() -> None:
    import jax
    import jax.numpy as jnp
    import optax

    import trainmedic.jax

    features = jnp.asarray(np.asarray(X, dtype=np.float32))
    target = jnp.asarray(np.asarray(y, dtype=np.float32))

    def loss_fn(w):
        logits = features @ w
        return jnp.mean(optax.sigmoid_binary_cross_entropy(logits, target))

    def make(tx):
        @jax.jit
        def step(w, state):
            loss, grads = jax.value_and_grad(loss_fn)(w)
            updates, state = tx.update(grads, state, w, value=loss)
            return optax.apply_updates(w, updates), state

        w = jnp.zeros(X.shape[1])
        state = tx.init(w)
        w, state = step(w, state)  # compile outside the timing
        jax.block_until_ready(w)

        def run():
            nonlocal w, state
            for _ in range(500):
                w, state = step(w, state)
            jax.block_until_ready(w)

        return run

    compare(
        "jax", make(optax.adam(1e-2)), make(trainmedic.jax.guard(optax.adam(1e-2), every=EVERY, echo=False))
    )


if __name__ == "__main__":
    xgboost_pair()
    lightgbm_pair()
    catboost_pair()
    jax_pair()
