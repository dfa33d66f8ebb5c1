"""The foreign-code corpus (benchmarks/foreign): its manifest, and its fast subset run for real.

The subset runs the fast runs of the manifest under `trainmedic run`, two at a time:
healthy runs must give no warning, bug runs their codes and exit status, and every run
must record step events. Two of its bug runs are also read for the evidence users see: a
Keras loss at chance level names the chance level and where the class count comes from,
and a crash after a loss explosion names the explosion as its likely cause.
`python -m benchmarks.foreign` runs the whole corpus.
"""

from __future__ import annotations

import pytest
from benchmarks.foreign.corpus import LAUNCHERS, load, run_all, table

from trainmedic import registry

RUNS = load()


def test_manifest_scripts_exist_and_name_registered_codes() -> None:
    codes = {spec.code for spec in registry.all_specs()}
    assert len({r.script for r in RUNS}) >= 30  # the corpus issue #16 asks for
    for run in RUNS:
        assert run.path.is_file(), run.path
        assert run.launcher in LAUNCHERS, run.name
        assert set(run.expected) <= codes, run.name
    bugs = [r for r in RUNS if r.bug]
    assert all(r.expected for r in bugs)
    for run in bugs:
        assert f'"{run.bug}"' in run.path.read_text(), f"{run.name}: the script does not know its bug"


@pytest.mark.slow
@pytest.mark.heavy
def test_fast_subset_detects_every_bug_and_warns_on_no_healthy_script() -> None:
    results = {r.run.name: r for r in run_all([r for r in RUNS if r.fast])}
    assert len(results) >= 5
    assert all(r.ok for r in results.values()), table(list(results.values()))

    chance = results["keras_sequential_mnist --bug shuffled-labels"].findings["TRN003"]
    assert "stayed at chance level over 4 epochs" in chance["message"]  # 4 epochs, not 4 x ranks
    assert "chance ln 10 = 2.303" in chance["message"]
    assert chance["evidence"]["classes"] == 10
    assert "categorical_crossentropy" in chance["evidence"]["classes_from"]

    crash = results["word_lm_overflow --bug scaled-lr"]
    assert "OverflowError" in crash.stderr
    assert crash.findings["RUN009"]["evidence"]["likely_cause"]["code"] == "TRN002"
