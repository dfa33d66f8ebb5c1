"""Runs several example scripts in ONE interpreter (TensorFlow starts once), marking each.

Usage: python example_driver.py PATH[::ARG...] ...  Before each script an
observation `test_example` is emitted, so a test can split the run's events per
example. A script's exception is printed (EXAMPLE-ERROR) and the next one runs.
"""

import runpy
import sys

from trainmedic.events import GuardObservation
from trainmedic.instrument import channel

for spec in sys.argv[1:]:
    path, *args = spec.split("::")
    channel.emit(GuardObservation(check="test_example", data={"spec": spec}))
    sys.argv = [path, *args]
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit:
        pass
    except Exception as exc:
        print(f"EXAMPLE-ERROR {spec} {type(exc).__name__}: {str(exc)[:300]}", flush=True)
    print(f"EXAMPLE-DONE {spec}", flush=True)
