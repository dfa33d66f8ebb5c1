"""JAX / Flax / optax under `trainmedic run` with no code change: real runs of flax's MNIST example
and of optax's README loop in their own style (benchmarks/foreign/jax/flax_mnist.py, optax_raw.py)
and of the loops in `jax_loops.py`.

The printed epoch summaries are read as the curve, the Flax optimizers carry the guard, and the
scalars written through tensorboardX are curve points; the healthy runs stay quiet.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

from trainmedic.eventlog.reader import read_events
from trainmedic.events import Epoch, Event, FindingRaised, Metric, Step
from trainmedic.supervise.loginterp import LogInterpreter
from trainmedic.supervise.metriclines import PRINTED, epoch_metrics

from ..conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]
FLAX_MNIST = ROOT / "benchmarks" / "foreign" / "jax" / "flax_mnist.py"
OPTAX_RAW = ROOT / "benchmarks" / "foreign" / "jax" / "optax_raw.py"
LOOPS = Path(__file__).with_name("jax_loops.py")
FLAX_LINE = "epoch:% 3d, train_loss: %.4f, train_accuracy: %.2f, test_loss: %.4f, test_accuracy: %.2f"


class Run:
    def __init__(self, out: Path, stderr: str) -> None:
        self.out = out
        self.stderr = stderr
        self.events: list[Event] = read_events(out / "events.jsonl").events
        found = json.loads((out / "findings.json").read_text())["findings"]
        self.findings = {f["code"]: f for f in found if f["severity"] in ("warning", "error")}

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    def raised(self) -> list[dict[str, Any]]:
        """The findings the in-process guards raised, as they raised them."""
        return [e.finding for e in self.of(FindingRaised)]


def supervised(out: Path, *argv: str) -> Run:
    result = run_cli("run", "--quiet", "--out", str(out), "--", *argv, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return Run(out, result.stderr)


@pytest.fixture(scope="module")
def mnist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """The example as written, and with each of its bugs: one run each, shared by the tests."""
    base = tmp_path_factory.mktemp("flax_mnist")
    runs = {"healthy": supervised(base / "healthy", sys.executable, str(FLAX_MNIST))}
    for bug in ("lr-nan", "shuffled-labels"):
        runs[bug] = supervised(base / bug, sys.executable, str(FLAX_MNIST), "--bug", bug)
    return runs


# -- the printed epoch summaries ----------------------------------------------------------------


def test_flax_epoch_lines_are_metrics_and_other_lines_are_not() -> None:
    absl = "I1207 13:45:06.290143 140192970963840 train.py:152] "
    assert epoch_metrics(absl + FLAX_LINE % (3, 0.41, 90.0, 0.5, 88.5)) == (
        3,
        {"train_loss": 0.41, "train_accuracy": 90.0, "test_loss": 0.5, "test_accuracy": 88.5},
    )
    nan = epoch_metrics("INFO:absl:" + FLAX_LINE % (1, math.nan, 9.8, math.nan, 9.8))
    assert nan is not None
    assert math.isnan(nan[1]["train_loss"])
    assert epoch_metrics("epoch=2, loss=0.3 | val acc: 90%") == (2, {"loss": 0.3, "val acc": 90.0})
    for ordinary in (
        "Train Epoch: 3 [640/60000]\tLoss: 0.204",  # a PyTorch progress line
        "epoch 3: loss 0.4100",  # a sentence
        "{'loss': 0.41, 'epoch': 1.0}",  # the HF Trainer's dict (read in process)
        "epoch: 1.5, loss: 0.3",  # not a whole epoch
        "epoch: 3, train_accuracy: 0.9",  # no loss
        "epoch: 3, loss: 0.4, saved to /tmp/ckpt",  # not only metrics
        "Epoch 3/10",
    ):
        assert epoch_metrics(ordinary) is None, ordinary


def test_the_interpreter_counts_printed_epochs_from_zero() -> None:
    events: list[Event] = []
    logs = LogInterpreter(events.append)
    for epoch in (1, 2):
        logs.on_line("stderr", FLAX_LINE % (epoch, 2.3 / epoch, 10.0, 2.3, 10.0))
    assert [(e.epoch, e.metrics["train_loss"]) for e in events if isinstance(e, Epoch)] == [
        (0, 2.3),
        (1, 1.15),
    ]


# -- flax's MNIST example under `trainmedic run` ------------------------------------------------


@pytest.mark.slow
@pytest.mark.heavy
def test_flax_mnist_healthy_shows_its_curve_and_is_quiet(mnist: dict[str, Run]) -> None:
    run = mnist["healthy"]
    assert run.findings == {}
    losses = [e.metrics["train_loss"] for e in run.of(Epoch)]
    assert len(losses) == 4
    assert losses[-1] < losses[0] / 3
    assert run.of(Step)  # the guard inside the jitted `apply_gradients`


@pytest.mark.slow
@pytest.mark.heavy
def test_flax_mnist_nan_is_found_at_its_step(mnist: dict[str, Run]) -> None:
    found = mnist["lr-nan"].findings
    assert set(found) == {"TRN001", "TRN007"}
    assert found["TRN007"]["step"] == 2  # the jitted update of step 2, seen inside jit
    assert found["TRN007"]["evidence"]["update_norm"] == "inf"
    assert found["TRN001"]["epoch"] == 1


@pytest.mark.slow
@pytest.mark.heavy
def test_flax_mnist_shuffled_labels_are_not_learning(mnist: dict[str, Run]) -> None:
    found = mnist["shuffled-labels"].findings
    assert set(found) == {"TRN003"}
    assert "chance ln 10 = 2.303" in found["TRN003"]["message"]


# -- TrainState, optax.MultiSteps, inject_hyperparams, nnx.Optimizer, tensorboardX --------------


@pytest.mark.slow
def test_flax_optimizers_are_guarded_without_changing_what_the_script_reads(tmp_path: Path) -> None:
    run = supervised(tmp_path / "run", sys.executable, str(LOOPS), str(tmp_path / "tbx"))
    out = (run.out / "output.log").read_text()
    assert "learning rate 0.05" in out  # `state.opt_state.hyperparams` still reads the bare state
    assert "done" in out
    nonfinite = run.raised()
    # one TRN007 per guard that saw a NaN gradient: Linen at step 7 (MultiSteps), NNX at step 5;
    # the healthy Linen loop raised nothing
    assert sorted(f["step"] for f in nonfinite if f["code"] == "TRN007") == [5, 7]
    scalars = [m for m in run.of(Metric) if m.name == "train/loss"]
    assert [m.step for m in scalars[:3]] == [1, 2, 3]
    assert len(scalars) == 42  # 30 + 12 steps, each written once


def test_a_converged_runs_bump_is_not_an_explosion_but_a_new_high_is() -> None:
    from trainmedic.rules.trn import trn007_exploding_gradients as trn007

    converged = [1.2, 0.8, *([3e-7] * 40)]  # its first samples near 1, then near zero for long
    assert trn007.judge_jax(4301, 0.0019, 1e-4, converged) is None  # 6,000x the median, below its start
    exploded = trn007.judge_jax(900, 5e3, 1e2, converged)
    assert exploded is not None
    assert exploded.step == 900


def test_the_guard_is_installed_once_and_not_at_all_when_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    import optax
    from flax.training import train_state

    from trainmedic.jax import _auto as jax_auto

    once = jax_auto.guarded(optax.sgd(0.1))
    assert jax_auto.guarded(once) is once  # a script's own guard is kept, not wrapped again
    monkeypatch.setenv("TRAINMEDIC_JAX", "0")
    jax_auto.install_train_state(train_state)
    assert not getattr(train_state.TrainState.__dict__["create"].__func__, "_trainmedic", False)


# -- raw optax: optax's README loop, no Flax --------------------------------------------------


@pytest.fixture(scope="module")
def optax_raw(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """optax's README loop as written and with its hand-written loss: one run each (300 steps)."""
    base = tmp_path_factory.mktemp("optax_raw")
    script = [sys.executable, str(OPTAX_RAW), "--steps", "300"]
    return {
        "healthy": supervised(base / "healthy", *script),
        "lr-nan": supervised(base / "lr-nan", *script, "--bug", "lr-nan"),
    }


@pytest.mark.slow
def test_raw_optax_healthy_is_seen_and_quiet(optax_raw: dict[str, Run]) -> None:
    run = optax_raw["healthy"]
    assert run.findings == {}
    steps = [s for s in run.of(Step) if s.logged is None]  # the guard in the jitted `optimizer.update`
    assert [s.step for s in steps[:3]] == [1, 101, 201]
    assert all(math.isfinite(s.metrics["grad_norm"]) for s in steps)
    printed = [s for s in run.of(Step) if s.logged == PRINTED]  # `step 0, loss: 0.69...` lines
    assert [s.step for s in printed] == [0, 100, 200]
    assert all(math.isfinite(s.metrics["loss"]) and "grad_norm" not in s.metrics for s in printed)


@pytest.mark.slow
def test_raw_optax_nan_gradient_is_found_at_its_step(optax_raw: dict[str, Run]) -> None:
    run = optax_raw["lr-nan"]
    assert set(run.findings) == {"TRN001", "TRN007"}
    assert run.findings["TRN007"]["step"] == 4
    assert run.findings["TRN007"]["evidence"]["grad_norm"] == "nan"
    # each non-finite step calls the host (the guard cannot tell a lost run from a bad batch)
    assert max(s.step for s in run.of(Step) if s.logged is None) == 300
    # its printed `step 100, loss: nan`: the loss curve, NaN from the first step printed after it
    assert run.findings["TRN001"]["step"] == 100
    assert run.findings["TRN001"]["evidence"]["metric"] == "loss"
    assert run.findings["TRN001"]["evidence"]["last_finite_step"] == 0


def test_optax_builders_guard_once_and_keep_the_state_readable(monkeypatch: pytest.MonkeyPatch) -> None:
    """The builders patched on a copy of the `optax` namespace (the real one stays bare)."""
    import types

    import jax.numpy as jnp
    import optax

    import trainmedic.jax as tj
    from trainmedic.jax import _auto as jax_auto

    monkeypatch.setattr(optax.MultiSteps, "__init__", optax.MultiSteps.__init__)  # restored after
    ox = types.ModuleType("optax")
    ox.__dict__.update(vars(optax))
    ox.contrib = types.ModuleType("optax.contrib")
    ox.contrib.__dict__.update(vars(optax.contrib))
    jax_auto.install_optax(ox)
    params = {"w": jnp.ones(3)}

    chained = ox.chain(ox.clip_by_global_norm(1.0), ox.adamw(1e-3))
    state = chained.init(params)
    assert tj.is_guarded(chained)
    assert [type(s).__name__ for s in state.inner] == ["EmptyState", "tuple"]  # no guard inside

    injected = ox.inject_hyperparams(ox.adam)(learning_rate=0.1)
    assert tj.is_guarded(injected)
    assert float(injected.init(params).hyperparams["learning_rate"]) == pytest.approx(0.1)

    accumulated = ox.MultiSteps(ox.sgd(0.1), every_k_schedule=2)
    assert tj.is_guarded(accumulated)  # the guard around the accumulation, none inside it
    assert not tj.is_guarded(accumulated.inner_opt)
    assert int(accumulated.init(params).mini_step) == 0

    free = ox.contrib.schedule_free_adamw(1e-3)
    assert tj.is_guarded(free)  # its evaluation parameters still read the wrapped state
    ox.contrib.schedule_free_eval_params(free.init(params), params)

    mine = tj.guard(ox.adam(1e-3))  # a script's own guard replaces the automatic one
    assert type(mine.init(params).inner).__name__ == "tuple"
    assert not tj.is_guarded(ox.linear_schedule(1.0, 0.0, 10))
    assert ox.with_extra_args_support is optax.with_extra_args_support
    assert not tj.is_guarded(optax.adam(1e-3))
    assert not tj.is_guarded(optax.contrib.schedule_free_adamw(1e-3))

    monkeypatch.setenv("TRAINMEDIC_JAX", "0")
    off = types.ModuleType("optax")
    off.__dict__.update(vars(optax))
    jax_auto.install_optax(off)
    assert off.adam is optax.adam
