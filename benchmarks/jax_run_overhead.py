"""Per-step cost of the zero-code JAX guard: a Flax `TrainState` loop bare vs under `trainmedic run`.

    python benchmarks/jax_run_overhead.py [--pairs 5] [--steps 3000]
    python benchmarks/jax_run_overhead.py --in-process [--pairs 5] [--steps 3000]

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


def make_loop(guard: bool, steps: int):  # type: ignore[no-untyped-def]
    """A compiled Flax loop of `steps` steps; calling it returns its time per step in µs."""
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
    tx = optax.adam(1e-3)
    if guard:
        from trainmedic.jax._auto import guarded

        tx = guarded(tx)
    state = train_state.TrainState.create(
        apply_fn=model.apply, params=model.init(jax.random.PRNGKey(1), x), tx=tx
    )

    @jax.jit
    def step(state):
        loss, grads = jax.value_and_grad(lambda p: jnp.mean((state.apply_fn(p, x) - y) ** 2))(state.params)
        return state.apply_gradients(grads=grads), loss

    for _ in range(200):  # compile, warm up
        state, loss = step(state)
    jax.block_until_ready(loss)

    def timed() -> float:
        nonlocal state
        start = time.perf_counter()
        for _ in range(steps):
            state, loss = step(state)
        jax.block_until_ready(loss)
        return (time.perf_counter() - start) / steps * 1e6

    return timed


def child(steps: int) -> None:
    print(f"us_per_step={make_loop(False, steps)():.2f}", flush=True)


def in_process(pairs: int, steps: int) -> None:
    bare, guarded = make_loop(False, steps), make_loop(True, steps)
    rows = []
    for i in range(pairs):
        rows.append((bare(), guarded()))
        b, g = rows[-1]
        print(f"pair {i + 1}: bare {b:.1f} us/step, guarded {g:.1f} us/step, ratio {g / b:.3f}")
    print(
        f"median ratio {statistics.median(g / b for b, g in rows):.3f}, "
        f"median extra {statistics.median(g - b for b, g in rows):.1f} us/step (in process)"
    )


def measure(argv: list[str]) -> float:
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    line = next(part for part in out.split() if part.startswith("us_per_step="))
    return float(line.split("=")[1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--in-process", action="store_true", help="the guard alone, bare vs guarded")
    args = parser.parse_args()
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")
    if args.in_process:
        in_process(args.pairs, args.steps)
        return
    script = [sys.executable, os.path.abspath(__file__), CHILD, str(args.steps)]
    env_note = "XLA_FLAGS=--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
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
