"""Runs many examples in ONE instrumented interpreter (torch imports once), as under `run`.

Before each example it sends a marker event and gives the auto-installed
monitor a fresh start, so a test can cut the events file into one record per
example. argv: NAME or NAME:fixed (the example's `main(False)` or `main(True)`), or
NAME:VARIANT (`main("VARIANT")`, as `python NAME.py VARIANT` runs it) ...
"""

import contextlib
import io
import runpy
import sys
from pathlib import Path

import torch
from trainmedic.events import GuardObservation
from trainmedic.instrument import channel
from trainmedic.torch import _patches
from trainmedic.torch._monitor import Monitor

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "torch"


def main(cases):
    assert _patches.active() is not None, "the boot module did not instrument torch"
    sys.path.insert(0, str(EXAMPLES))
    for case in cases:
        name, _, variant = case.partition(":")
        _patches.active().close()
        _patches.install(Monitor(channel.emit, mode="auto"))
        channel.emit(GuardObservation(check="example_start", data={"case": case}))
        example = runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name="example")
        with contextlib.redirect_stdout(io.StringIO()):
            example["main"](variant if variant not in ("", "fixed") else variant == "fixed")
    _patches.active().close()
    channel.emit(GuardObservation(check="example_start", data={"case": "<end>"}))
    torch.set_num_threads(1)


if __name__ == "__main__":
    main(sys.argv[1:])
