"""The foreign-code corpus (benchmarks/foreign): its manifest, and its fast subset run for real.

The subset runs each fast script as written and with each of its bugs under `trainmedic
run`, two at a time: healthy runs must give no warning, bug runs their codes, and every
run must record step events. `python -m benchmarks.foreign` runs the whole corpus.
"""

from __future__ import annotations

import pytest
from benchmarks.foreign.corpus import LAUNCHERS, load, run_all, table

from trainmedic import registry

RUNS = load()


def test_manifest_scripts_exist_and_name_registered_codes() -> None:
    codes = {spec.code for spec in registry.all_specs()}
    assert len({r.script for r in RUNS}) >= 9
    for run in RUNS:
        assert run.path.is_file(), run.path
        assert run.launcher in LAUNCHERS, run.name
        assert set(run.expected) <= codes, run.name
    bugs = [r for r in RUNS if r.bug]
    assert all(r.expected for r in bugs)
    for run in bugs:
        assert f'"{run.bug}"' in run.path.read_text(), f"{run.name}: the script does not know its bug"


@pytest.mark.slow
def test_fast_subset_detects_every_bug_and_warns_on_no_healthy_script() -> None:
    results = run_all([r for r in RUNS if r.fast])
    assert len(results) >= 5
    assert all(r.ok for r in results), table(results)
