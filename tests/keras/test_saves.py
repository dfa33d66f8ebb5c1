"""Keras 3 saves checked (`trainmedic.keras._saves`): what `Model.save`, `save_weights` and
`ModelCheckpoint` wrote, reloaded in a separate process as a user loads it, against the model at
the save: TOR015 `saved-model-differs`, each failure beside its healthy twin.

One child under the boot module (as `trainmedic run` runs a script) runs `run_saves.py` on
Keras 3 with TensorFlow (see its docstring for the cases): custom layers and a subclassed model
not registered (the reload fails), a registered layer whose `get_config()` leaves out an
argument (it reloads with the default: outputs differ), a "float16" model whose
BatchNormalization variance overflowed (inf written), and the healthy saves (Sequential,
functional with `ModelCheckpoint` each epoch and `save_best_only` weights, a model trained on at
once after its save, registered layers, "mixed_float16"), and a save with the checks off.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trainmedic.events import GuardObservation
from trainmedic.findings import Finding
from trainmedic.keras import _saves
from trainmedic.record import RunRecord
from trainmedic.registry import run_rules
from trainmedic.rules.tor import tor015_saved_model_differs as tor015

from ..helpers import InstrumentedRun, run_instrumented
from .conftest import line_env

HERE = Path(__file__).resolve().parent
# pytest-timeout counts a module fixture's setup in its first test: one Keras run and its
# worker (two starts of TensorFlow) on a loaded machine.
pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]


@pytest.fixture(scope="module")
def child(tmp_path_factory: pytest.TempPathFactory) -> tuple[InstrumentedRun, Path]:
    tmp = tmp_path_factory.mktemp("keras-saves")
    run = run_instrumented(
        ["python", str(HERE / "run_saves.py"), str(tmp / "out")],
        tmp,
        env={**line_env("keras3-tensorflow"), "OMP_NUM_THREADS": "1"},
        timeout=500,
    )
    assert run.result.returncode == 0, run.result.stderr[-3000:]
    assert run.result.stdout.rstrip().endswith("DONE")
    return run, tmp


@pytest.fixture(scope="module")
def by_name(child: tuple[InstrumentedRun, Path]) -> dict[str, list[dict[str, Any]]]:
    """The save checks' observations, by the name of the file they are about."""
    found: dict[str, list[dict[str, Any]]] = {}
    for event in child[0].record.events:
        if isinstance(event, GuardObservation) and event.check == tor015.RELOAD_OBSERVATION:
            found.setdefault(_name(event.data["path"]), []).append(event.data)
    return found


@pytest.fixture(scope="module")
def results(child: tuple[InstrumentedRun, Path]) -> dict[str, list[dict[str, Any]]]:
    """What the worker measured for each save it took, by file name (from the run's scratch folder)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for result in sorted((child[1] / "save-checks").glob("keras-*/*/result.json")):
        job = json.loads((result.parent / "job.claimed.json").read_text())
        found.setdefault(_name(job["path"]), []).append({**job, **json.loads(result.read_text())})
    return found


@pytest.fixture(scope="module")
def finding(child: tuple[InstrumentedRun, Path]) -> Finding:
    (found,) = [f for f in run_rules(RunRecord.of(child[0].record.events)) if f.code == "TOR015"]
    return found


def _name(path: str) -> str:
    """A saved file's name, under its example's folder for the examples' files."""
    saved = Path(path)
    return saved.name if saved.parent.name == "out" else f"{saved.parent.name}/{saved.name}"


def only(observations: list[dict[str, Any]]) -> dict[str, Any]:
    (observation,) = observations
    return observation


def test_an_unregistered_custom_layer_does_not_reload(by_name) -> None:
    data = only(by_name["custom.keras"])
    assert (data["kind"], data["saved"], data["missing_class"]) == (
        tor015.RELOAD_FAILED,
        "keras-model",
        "Scale",
    )
    assert data["error"] == "TypeError: Could not locate class 'Scale'"
    assert data["where"].startswith("run_saves.py:")
    fix = tor015.reload_fix(data) or ""
    assert "@keras.saving.register_keras_serializable()" in fix
    assert "custom_objects={'Scale': Scale}" in fix


def test_an_unregistered_subclassed_model_does_not_reload(by_name) -> None:
    data = only(by_name["subclassed.keras"])
    assert (data["kind"], data["missing_class"]) == (tor015.RELOAD_FAILED, "Sub")
    assert "does not reload with keras.models.load_model" in tor015.reload_message(data)


def test_a_config_left_out_of_get_config_reloads_otherwise(by_name, finding) -> None:
    data = only(by_name["config-lost.keras"])
    assert (data["kind"], data["probe"], data["dtype"]) == (
        tor015.OUTPUTS_DIFFER,
        "fit's first rows",
        "float32",
    )
    assert data["max_abs_diff"] > tor015.OUTPUT_TOLERANCE["float32"] * data["output_scale"]
    # the run's first TOR015 observation is the finding's
    assert "config-lost.keras" in finding.message
    assert "reloaded with keras.models.load_model" in finding.message
    assert "get_config() return every argument of its __init__" in (finding.fix or "")


def test_a_float16_variable_that_overflowed_is_written_as_inf(child, by_name) -> None:
    assert "float16 moving_variance [inf, inf, inf, inf]" in child[0].result.stdout
    data = only(by_name["float16.keras"])
    assert data["kind"] == tor015.NONFINITE
    assert data["nonfinite_examples"] == ["layers/batch_normalization/vars/3"]  # moving_variance
    assert "mixed_float16" in (tor015.reload_fix(data) or "")


def test_healthy_saves_reload_as_they_were_saved(by_name, results) -> None:
    quiet = ("seq.keras", "func.keras", "best.weights.h5", "moved.keras", "registered.keras", "mixed16.keras")
    for name in quiet:
        assert name not in by_name, by_name.get(name)
        # really reloaded and compared on a probe (the last check of the path; earlier ones of a
        # path saved each epoch were replaced before the worker took them)
        compared = [r for r in results[name] if "max_abs_diff" in r]
        assert compared, results[name]
        for result in compared:
            assert result["max_abs_diff"] <= 1e-6 * max(result["output_scale"], 1.0)
    # arrays given to fit: its first rows; a tf.data.Dataset: inputs drawn in the model's shape
    assert results["seq.keras"][0]["probe"] == "fit's first rows"
    assert results["func.keras"][-1]["probe"] == results["best.weights.h5"][-1]["probe"] == "drawn"


def test_a_save_trained_on_at_once_is_compared_with_the_model_as_saved(results) -> None:
    # moved.keras was saved, then trained with a learning rate of 50: the reference is the
    # variables copied in the save call, not the live ones
    (result,) = results["moved.keras"]
    assert result["max_abs_diff"] == 0.0


def test_a_class_registered_in_the_script_is_not_judged(by_name, results) -> None:
    # only the script defines it: no other process can import it to reload the file
    assert "main-registered.keras" not in by_name
    (result,) = results["main-registered.keras"]
    assert result["skipped"] == "Shift is registered in the script itself"
    assert result["tensors"]["nonfinite"] == 0  # still read back


def test_the_example_and_its_fix(by_name, results) -> None:
    data = only(by_name["custom_layer_not_registered/model.keras"])
    assert (data["kind"], data["missing_class"]) == (tor015.RELOAD_FAILED, "Gate")
    assert data["where"].startswith(
        "custom_layer_not_registered.py:"
    )  # the fit that ModelCheckpoint saved in
    # saved each epoch: the saves the worker had not started yet were replaced by the next
    assert len(results["custom_layer_not_registered/model.keras"]) < 3
    assert "custom_layer_not_registered_fixed/model.keras" not in by_name


def test_the_checks_turn_off(by_name, results) -> None:
    assert "off.keras" not in by_name
    assert "off.keras" not in results


@pytest.mark.parametrize(
    ("method", "path", "args", "kwargs", "checked"),
    [
        ("save", "m.keras", (), {}, True),
        ("save", "m.keras", (True, False), {}, False),  # zipped=False: a folder
        ("save", "m.h5", (), {}, False),  # the legacy HDF5 format
        ("save", "gs://bucket/m.keras", (), {}, False),
        ("save_weights", "m.weights.h5", (), {}, True),
        ("save_weights", "m.weights.json", (), {"max_shard_size": 0.5}, False),  # sharded
    ],
)
def test_which_saves_are_checked(method, path, args, kwargs, checked) -> None:
    assert _saves._checkable(method, path, args, kwargs) is checked
