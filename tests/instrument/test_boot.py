"""The boot module in a real child interpreter: announce, post-import hooks, chaining, off switch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainmedic.eventlog.reader import read_events
from trainmedic.events import ProcessSpawn
from trainmedic.instrument.channel import boot_dir

SRC = Path(__file__).resolve().parents[2] / "src"  # this checkout's trainmedic, not an installed one


def run_child(tmp_path: Path, code: str, extra_path: list[str] | None = None, **env: str):
    events = tmp_path / "events.jsonl"
    pythonpath = [str(boot_dir()), *(extra_path or []), str(SRC)]
    full_env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(pythonpath),
        "TRAINMEDIC_EVENTS": str(events),
        **env,
    }
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=60, check=False
    )
    found = read_events(events).events if events.exists() else []
    return result, found


def test_child_announces_itself_with_argv_and_rank(tmp_path: Path) -> None:
    result, events = run_child(tmp_path, "print('hi')", RANK="3")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hi\n"
    assert result.stderr == ""
    (announce,) = [e for e in events if isinstance(e, ProcessSpawn)]
    assert announce.source == "announce"
    assert announce.rank == 3
    assert announce.ppid == os.getpid()
    assert announce.cmdline[-2:] == ["-c", "print('hi')"]


def test_post_import_hook_fires_only_when_the_module_is_imported(tmp_path: Path) -> None:
    pkg = tmp_path / "site"
    (pkg / "fakeframework").mkdir(parents=True)
    (pkg / "fakeframework" / "__init__.py").write_text("VALUE = 41\n")
    code = (
        "import sys\n"
        "from trainmedic.instrument import hooks\n"
        "seen = []\n"
        "hooks.when_imported('fakeframework', lambda m: seen.append(m.VALUE + 1))\n"
        "assert seen == []\n"
        "import fakeframework\n"
        "assert fakeframework.__spec__.loader.__class__.__name__ != '_CallbackLoader'\n"
        "print(seen)\n"
    )
    result, _ = run_child(tmp_path, code, extra_path=[str(pkg)])
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[42]\n"


def test_a_hook_registered_while_its_module_executes_waits_for_the_whole_module(tmp_path: Path) -> None:
    """trl's SFTTrainer module imports transformers' Trainer, whose integration registers a hook
    on that very module, half made: the hook must see it once its code has run."""
    pkg = tmp_path / "site"
    (pkg / "fakeframework").mkdir(parents=True)
    (pkg / "fakeframework" / "__init__.py").write_text("import fakehelper\nVALUE = 41\n")
    (pkg / "fakehelper.py").write_text(
        "from trainmedic.instrument import hooks\n"
        "import __main__\n"
        "hooks.when_imported('fakeframework', lambda m: __main__.seen.append(('late', m.VALUE)))\n"
    )
    code = (
        "from trainmedic.instrument import hooks\n"
        "seen = []\n"
        "hooks.when_imported('fakeframework', lambda m: seen.append(('early', m.VALUE)))\n"
        "import fakeframework\n"
        "print(seen)\n"
    )
    result, _ = run_child(tmp_path, code, extra_path=[str(pkg)])
    assert result.returncode == 0, result.stderr
    assert result.stdout == "[('early', 41), ('late', 41)]\n"


def test_existing_sitecustomize_still_runs(tmp_path: Path) -> None:
    user = tmp_path / "user"
    user.mkdir()
    (user / "sitecustomize.py").write_text("import builtins\nbuiltins.USER_SITE_RAN = True\n")
    result, events = run_child(tmp_path, "import builtins; print(builtins.USER_SITE_RAN)", [str(user)])
    assert result.returncode == 0, result.stderr
    assert result.stdout == "True\n"
    assert any(isinstance(e, ProcessSpawn) for e in events)


def test_instrument_off_writes_nothing_and_changes_nothing(tmp_path: Path) -> None:
    result, events = run_child(tmp_path, "print('hi')", TRAINMEDIC_INSTRUMENT="0")
    assert (result.returncode, result.stdout, result.stderr) == (0, "hi\n", "")
    assert events == []


def test_every_hook_target_names_an_installer_in_its_integration() -> None:
    """The hook table names installers by string: each must exist, outside instrument/."""
    import ast

    from trainmedic.instrument.bootstrap import FRAMEWORK_HOOKS

    for framework, target in FRAMEWORK_HOOKS.items():
        module_name, _, func_name = target.partition(":")
        assert not module_name.startswith("trainmedic.instrument"), target
        base = SRC.joinpath(*module_name.split("."))
        path = base.with_suffix(".py") if base.with_suffix(".py").exists() else base / "__init__.py"
        assert path.exists(), f"{framework}: {target} has no module"
        functions = {n.name for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef)}
        assert func_name in functions, f"{framework}: {target} has no {func_name}()"


def test_booting_imports_no_integration_before_its_framework(tmp_path: Path) -> None:
    """Arming the hooks must not import `trainmedic.torch` (hence torch) or any other integration."""
    code = "import sys; print(' '.join(sorted(m for m in sys.modules if m.startswith('trainmedic'))))"
    result, events = run_child(tmp_path, code)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert any(isinstance(e, ProcessSpawn) for e in events)  # the boot ran
    loaded = set(result.stdout.split())
    assert "trainmedic.instrument.bootstrap" in loaded
    integrations = {"keras", "torch", "lightning", "hf", "sklearn", "xgboost", "lightgbm", "catboost", "ray"}
    assert not {m for m in loaded if m.split(".")[1:2] and m.split(".")[1] in integrations}


def test_pytorch_lightning_is_instrumented_without_importing_lightning(tmp_path: Path) -> None:
    """Both Lightning packages hooked: importing one must not import (or half-instrument) the other."""
    pytest.importorskip("pytorch_lightning")
    code = (
        "import sys, pytorch_lightning\n"
        "print('lightning' in sys.modules, pytorch_lightning.Trainer.__init__._trainmedic)\n"
    )
    result, _ = run_child(tmp_path, code)
    assert result.returncode == 0, result.stderr
    assert "trainmedic:" not in result.stderr
    assert result.stdout == "False True\n"
