"""trainmedic boot module, put first on PYTHONPATH by `trainmedic run`.

Runs trainmedic's bootstrap in every Python process of the supervised tree,
then chains to the `sitecustomize` this one shadows, so the user's own start-up
code still runs. Any failure is one line on stderr; the user's program runs on.
"""

import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))


def _trainmedic_start() -> None:
    try:
        import trainmedic  # noqa: F401
    except ImportError:
        # The trainer's interpreter (another venv) may lack trainmedic: use ours.
        package_dir = os.environ.get("TRAINMEDIC_PKG_DIR")
        if package_dir and package_dir not in sys.path:
            sys.path.append(package_dir)
    from trainmedic.instrument import bootstrap

    bootstrap.start()


def _chain_next_sitecustomize() -> None:
    """Load the next `sitecustomize` on sys.path after this directory, if any."""
    rest = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    for entry in rest:
        candidate = os.path.join(entry or ".", "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_trainmedic_chained_sitecustomize", candidate)
            if spec is not None and spec.loader is not None:
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
            return


try:
    _trainmedic_start()
except Exception as _exc:  # never break the user's interpreter
    sys.stderr.write(f"trainmedic: instrumentation disabled in pid {os.getpid()}: {_exc!r}\n")

_chain_next_sitecustomize()
