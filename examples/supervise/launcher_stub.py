"""A launcher stub: starts the real trainer as a child Python process and waits for it.

This is what a venv redirector (Windows' python.exe in a venv), `uv run` or a
wrapper script does: the PID you hold is this process (no CPU, a few MB), not
the trainer.

    python examples/supervise/launcher_stub.py examples/supervise/train.py --epochs 3
"""

import subprocess
import sys


def main() -> None:
    child = subprocess.Popen([sys.executable, *sys.argv[1:]])
    try:
        returncode = child.wait()
    except KeyboardInterrupt:
        returncode = child.wait()
    # As a shell does: a child killed by signal N is reported as 128+N.
    raise SystemExit(128 - returncode if returncode < 0 else returncode)


if __name__ == "__main__":
    main()
