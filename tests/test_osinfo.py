"""osinfo gives the strings `platform` gives, without its `uname -p` subprocess."""

from __future__ import annotations

import platform
import subprocess
import sys

from trainmedic import osinfo


def test_the_same_answers_as_platform_on_this_machine() -> None:
    assert osinfo.python_version() == platform.python_version()
    assert osinfo.python_implementation() == platform.python_implementation()
    assert osinfo.uname() == (platform.system(), platform.release(), platform.machine())
    assert osinfo.libc() == platform.libc_ver()
    assert osinfo.platform_string() == platform.platform()


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
