"""Keeps the data flow true as the code grows: imports point one way.

- rules/ are pure: no framework, no I/O module, no collector.
- the boot path (instrument.bootstrap/hooks/channel, events, findings) is stdlib-only,
  because it runs inside the user's interpreter.
- core modules never import collectors, renderers or the CLI.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "trainmedic"
FRAMEWORKS = {
    "torch",
    "tensorflow",
    "keras",
    "tf_keras",
    "lightning",
    "pytorch_lightning",
    "transformers",
    "jax",
    "flax",
    "xgboost",
    "lightgbm",
    "catboost",
    "deepspeed",
    "ray",
    "sklearn",
}
IO_MODULES = {"subprocess", "socket", "shutil", "psutil", "urllib", "http", "requests", "pynvml"}
STDLIB_ONLY = [
    "events.py",
    "findings.py",
    "instrument/bootstrap.py",
    "instrument/hooks.py",
    "instrument/channel.py",
    "instrument/boot/sitecustomize.py",
]
CORE = ["events.py", "findings.py", "errors.py", "record.py", "registry.py"]
COLLECTORS = {"supervise", "instrument", "diagnose", "data", "train", "report", "cli"}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def top(name: str) -> str:
    return name.split(".", maxsplit=1)[0]


@pytest.mark.parametrize(
    "path", sorted((SRC / "rules").rglob("*.py")), ids=lambda p: str(p.relative_to(SRC / "rules"))
)
def test_rules_are_pure(path: Path) -> None:
    mods = imported_modules(path)
    assert not {top(m) for m in mods} & (FRAMEWORKS | IO_MODULES), mods
    assert not any(m.startswith("trainmedic.") and m.split(".")[1] in COLLECTORS for m in mods), mods
    source = path.read_text()
    for call in ("open(", ".read_text(", ".write_text(", "print("):
        assert call not in source, f"{path.name} does I/O: {call}"


@pytest.mark.parametrize("rel", STDLIB_ONLY)
def test_boot_path_is_stdlib_only(rel: str) -> None:
    import sys

    for mod in imported_modules(SRC / rel):
        root = top(mod)
        assert root in sys.stdlib_module_names or root == "trainmedic", f"{rel} imports {mod}"


@pytest.mark.parametrize("rel", CORE)
def test_core_does_not_import_collectors(rel: str) -> None:
    for mod in imported_modules(SRC / rel):
        parts = mod.split(".")
        assert not (parts[0] == "trainmedic" and len(parts) > 1 and parts[1] in COLLECTORS), mod
        assert top(mod) not in FRAMEWORKS, mod


def test_no_framework_import_at_package_import() -> None:
    import subprocess
    import sys

    code = (
        "import sys, trainmedic, trainmedic.registry, trainmedic.cli.main;"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {sorted(FRAMEWORKS)!r});"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_supervising_a_run_without_curves_imports_no_numpy_or_metadata_parser(tmp_path: Path) -> None:
    """The supervisor's fixed cost per run is its imports: numpy (~0.2 s of CPU) is imported only
    when a run has metric curves to judge, importlib.metadata never, NVML only where a driver is;
    a clean run compiles no worker-death patterns and needs neither tempfile nor hashlib, nor
    shutil (which loads bz2 and lzma) for a command given by path, nor the `html` package's
    entity table, nor configcheck for a command that names no config file, nor click (`run`
    has its own argparse parser). The exit handler
    that reports them runs: the console script's fast exit still runs them."""
    import subprocess
    import sys

    code = (
        "import sys, atexit;"
        "atexit.register(lambda: sys.stderr.write('IMPORTED ' + ' '.join(sorted(sys.modules)) + '\\n'));"
        "from trainmedic.cli.main import entry; entry()"
    )
    out = tmp_path / "run"
    command = [
        sys.executable,
        "-c",
        code,
        "run",
        "--quiet",
        "--out",
        str(out),
        "--",
        sys.executable,
        "-c",
        "pass",
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    assert (out / "report.html").exists()
    assert (out / "manifest.json").exists()
    imported = next(line for line in result.stderr.splitlines() if line.startswith("IMPORTED ")).split()
    assert "trainmedic.supervise.supervisor" in imported  # the check saw the supervisor's own modules
    assert not [m for m in imported if m.split(".")[0] == "numpy"]
    assert "importlib.metadata" not in imported
    assert "trainmedic.rules._workers" not in imported  # a failed run's patterns only
    assert "tempfile" not in imported
    assert "hashlib" not in imported
    unwanted = {"click", "shutil", "bz2", "lzma", "html", "html.entities", "trainmedic.configcheck"}
    assert not unwanted & set(imported)
    assert not [m for m in imported if m.split(".")[0] == "rich"]  # output to a pipe: plain text
    from trainmedic.supervise.gpu import driver_may_exist

    if not driver_may_exist():  # no NVIDIA driver here: NVML is not even imported
        assert "pynvml" not in imported
