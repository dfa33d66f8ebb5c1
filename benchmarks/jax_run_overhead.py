"""Per-step cost of the zero-code JAX guard: a Flax `TrainState` loop bare vs under `trainmedic run`.

    python benchmarks/jax_run_overhead.py [--pairs 5] [--steps 3000]

The child is a small jitted loop as users write it (an MLP, `optax.adam`, `TrainState`,
`apply_gradients` inside `jax.jit`, one thread): it times its own loop after compilation and
prints the time per step. It runs bare and under `trainmedic run` (which guards `TrainState.create`'s
`tx`), in interleaved pairs, so drift of the machine hits both; the ratio is per pair, then its
median. The guard reads nothing back on healthy steps except every `TRAINMEDIC_JAX_EVERY`-th
(default 100): what is measured is its device-side reductions and the sampled callbacks.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = "child"


def child(steps: int) -> None:
    import jax
    import jax.numpy as jnp
    import optax
    from flax import linen as nn
    from flax.training import train_state

    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.relu(nn.Dense(64)(x))
            return nn.Dense(1)(x)[:, 0]

    x = jax.random.normal(jax.random.PRNGKey(0), (128, 16))
    y = jnp.sin(x.sum(axis=1))
    model = MLP()
    state = train_state.TrainState.create(
        apply_fn=model.apply, params=model.init(jax.random.PRNGKey(1), x), tx=optax.adam(1e-3)
    )

    @jax.jit
    def step(state):
        loss, grads = jax.value_and_grad(lambda p: jnp.mean((state.apply_fn(p, x) - y) ** 2))(state.params)
        return state.apply_gradients(grads=grads), loss

    for _ in range(200):  # compile, warm up
        state, loss = step(state)
    jax.block_until_ready(loss)
    start = time.perf_counter()
    for _ in range(steps):
        state, loss = step(state)
    jax.block_until_ready(loss)
    per_step = (time.perf_counter() - start) / steps
    print(f"us_per_step={per_step * 1e6:.2f} loss={float(loss):.4f}", flush=True)


def measure(argv: list[str]) -> float:
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    line = next(part for part in out.split() if part.startswith("us_per_step="))
    return float(line.split("=")[1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3000)
    args = parser.parse_args()
    script = [sys.executable, os.path.abspath(__file__), CHILD, str(args.steps)]
    env_note = "XLA_FLAGS=--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.pairs):
            bare = measure(script)
            run = [
                sys.executable,
                "-m",
                "trainmedic",
                "run",
                "--quiet",
                "--out",
                f"{tmp}/run{i}",
                "--",
                *script,
            ]
            guarded = measure(run)
            rows.append((bare, guarded))
            print(
                f"pair {i + 1}: bare {bare:.1f} us/step, under run {guarded:.1f} us/step, "
                f"ratio {guarded / bare:.3f}"
            )
    ratios = [g / b for b, g in rows]
    extra = [g - b for b, g in rows]
    print(
        f"median ratio {statistics.median(ratios):.3f}, median extra {statistics.median(extra):.1f} us/step "
        f"({args.steps} steps, {args.pairs} interleaved pairs, {env_note})"
    )


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == CHILD:
        child(int(sys.argv[2]))
    else:
        main()
