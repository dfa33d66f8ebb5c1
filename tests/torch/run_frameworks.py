"""Lightning and Hugging Face examples in ONE instrumented interpreter, as under `run`.

Cases: `auto` (the Guard callback the boot module adds), `explicit` (a Guard
passed by the script; its in-process findings are printed as one JSON line).
A marker event precedes each case so a test can cut the events file.
argv: FRAMEWORK/EXAMPLE:fixed|bug:auto|explicit ...
"""

import contextlib
import io
import json
import runpy
import sys
from pathlib import Path

from trainmedic.events import GuardObservation
from trainmedic.instrument import channel
from trainmedic.torch import _patches
from trainmedic.torch._monitor import Monitor

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def guard_class(framework):
    if framework == "lightning":
        from trainmedic.lightning import Guard
    else:
        from trainmedic.hf import Guard
    return Guard


def main(cases):
    for case in cases:
        path, variant, how = case.split(":")
        framework = path.split("/")[0]
        _patches.active().close()
        _patches.install(Monitor(channel.emit, mode="auto"))
        channel.emit(GuardObservation(check="example_start", data={"case": case}))
        example = runpy.run_path(str(EXAMPLES / f"{path}.py"), run_name="example")
        guard = guard_class(framework)() if how == "explicit" else None
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            trainer = example["main"](fixed=variant == "fixed", callbacks=[guard] if guard else [])
        callbacks = getattr(trainer, "callbacks", None) or trainer.callback_handler.callbacks
        added = [type(c).__module__ for c in callbacks if type(c).__name__ == "Guard"]
        found = [f.code for f in guard.findings()] if guard else None
        print(json.dumps({"case": case, "guards": added, "findings": found}))
    _patches.active().close()
    channel.emit(GuardObservation(check="example_start", data={"case": "<end>"}))


if __name__ == "__main__":
    main(sys.argv[1:])
