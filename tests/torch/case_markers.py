"""Run many cases in ONE instrumented interpreter (torch imported once), as under `run`.

Before each case it gives the auto-installed monitor a fresh start and sends an
`example_start` marker, and a last one named `<end>` after them, so a test can cut the
events file into one record per case (`tests/helpers.records_by_case`). Used by the
`run_*.py` runners of this folder, which run as scripts (this folder is on their path).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import trainmedic
from trainmedic.events import GuardObservation
from trainmedic.instrument import channel
from trainmedic.torch import _patches
from trainmedic.torch._monitor import Monitor


def run_each(cases: Mapping[str, Callable[[], object]], names: Iterable[str], *, quiet: bool = False) -> None:
    """Run `cases[name]()` for each name, each under a fresh monitor between markers.
    `quiet`: the cases' own printing is swallowed."""
    assert _patches.active() is not None, "the boot module did not instrument torch"
    print(f"trainmedic from {Path(trainmedic.__file__).parent}")
    for name in names:
        _patches.active().close()
        _patches.install(Monitor(channel.emit, mode="auto"))
        channel.emit(GuardObservation(check="example_start", data={"case": name}))
        with contextlib.redirect_stdout(io.StringIO()) if quiet else contextlib.nullcontext():
            cases[name]()
    _patches.active().close()
    channel.emit(GuardObservation(check="example_start", data={"case": "<end>"}))
