"""_osinfo gives the strings `platform` and `socket` give, without `uname -p` or `socket`."""

from __future__ import annotations

import platform
import socket
import subprocess
import sys

from trainmedic import _osinfo


def test_the_same_answers_as_platform_on_this_machine() -> None:
    assert _osinfo.python_version() == platform.python_version()
    assert _osinfo.python_implementation() == platform.python_implementation()
    assert _osinfo.uname() == (platform.system(), platform.release(), platform.machine())
    assert _osinfo.libc() == platform.libc_ver()
    assert _osinfo.platform_string() == platform.platform()
    assert _osinfo.hostname() == socket.gethostname()


def test_a_manifest_starts_no_process_and_imports_no_platform() -> None:
    """platform.platform() would run `uname -p` (a fork and exec in every supervised run)."""
    code = (
        "import subprocess, sys\n"
        "started = []\n"
        "real = subprocess.Popen.__init__\n"
        "def spy(self, args, *a, **k):\n"
        "    started.append(args[0] if isinstance(args, list) else args)\n"
        "    real(self, args, *a, **k)\n"
        "subprocess.Popen.__init__ = spy\n"
        "from trainmedic.envinfo import capture_manifest\n"
        "capture_manifest(command=['python'], query_gpus=False)\n"
        "print(sorted(set(started)), 'platform' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['git'] False"
