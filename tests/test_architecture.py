"""Keeps the data flow true as the code grows: imports point one way.

- rules/ are pure: no framework, no I/O module, no collector. So is evidence/, what the
  collectors share with the rules; rules/_helpers is private to rules/.
- the boot path (instrument.bootstrap/hooks/channel, events, the event log's writer with its
  bucketing, findings) is stdlib-only, because it runs inside the user's interpreter.
- core modules never import collectors, renderers or the CLI.
- collectors never import the renderers (report/) or the CLI: what judges and renders the
  events is handed to them (verdict.py, given the report's renderer by the CLI), so facts
  flow one way.

What a supervised run costs in start-up is measured, not policed by import lists:
tests/benchmarks/test_supervisor_fixed_cost.py.
"""

from __future__ import annotations

import ast
import re
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
    "pyspark",
}
IO_MODULES = {"subprocess", "socket", "shutil", "psutil", "urllib", "http", "requests", "pynvml"}
STDLIB_ONLY = [
    "events.py",
    "eventlog/__init__.py",
    "eventlog/writer.py",
    "eventlog/steps.py",
    "eventlog/samples.py",
    "eventlog/reader.py",
    "findings.py",
    "instrument/bootstrap.py",
    "instrument/hooks.py",
    "instrument/channel.py",
    "instrument/boot/sitecustomize.py",
]
CORE = [
    "events.py",
    "eventlog/writer.py",
    "eventlog/steps.py",
    "eventlog/samples.py",
    "eventlog/reader.py",
    "findings.py",
    "errors.py",
    "record.py",
    "registry.py",
    "runfolder.py",
    "verdict.py",
    "atomicfile.py",
    "_osinfo.py",
]
COLLECTORS = {"supervise", "instrument", "diagnose", "data", "train", "report", "cli"}
# Code that gathers facts (processes, frameworks, files): packages or single modules of trainmedic.
COLLECTOR_CODE = (
    "supervise",
    "instrument",
    "diagnose",
    "data",
    "torch",
    "keras",
    "lightning",
    "hf",
    "jax",
    "sklearn",
    "boosting",
    "xgboost",
    "lightgbm",
    "catboost",
    "ray",
    "spark",
)
RENDERERS_AND_CLI = {"report", "cli"}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(
                f"{node.module}.{alias.name}" for alias in node.names
            )  # `from trainmedic import report`
    return names


def top(name: str) -> str:
    return name.split(".", maxsplit=1)[0]


PURE = sorted((SRC / "rules").rglob("*.py")) + sorted((SRC / "evidence").rglob("*.py"))


@pytest.mark.parametrize("path", PURE, ids=lambda p: str(p.relative_to(SRC)))
def test_rules_and_evidence_are_pure(path: Path) -> None:
    mods = imported_modules(path)
    assert not {top(m) for m in mods} & (FRAMEWORKS | IO_MODULES), mods
    assert not any(m.startswith("trainmedic.") and m.split(".")[1] in COLLECTORS for m in mods), mods
    source = path.read_text()
    for call in ("open(", ".read_text(", ".write_text(", "print("):
        assert call not in source, f"{path.name} does I/O: {call}"


@pytest.mark.parametrize("path", sorted((SRC / "evidence").rglob("*.py")), ids=lambda p: p.name)
def test_evidence_sits_below_the_rules(path: Path) -> None:
    """Collectors import evidence/: it never reaches up into the findings' files or their helpers."""
    assert not any(m.startswith("trainmedic.rules") for m in imported_modules(path))


def test_rule_helpers_are_private_to_rules() -> None:
    """What a collector shares with the findings is the public evidence/ package; rules/_helpers
    is what only the findings share, so nothing outside rules/ imports it."""
    offenders = [
        f"{path.relative_to(SRC)}: {mod}"
        for path in sorted(SRC.rglob("*.py"))
        if path.relative_to(SRC).parts[0] != "rules"
        for mod in imported_modules(path)
        if mod.startswith("trainmedic.rules._helpers")
    ]
    assert offenders == []


@pytest.mark.parametrize("rel", STDLIB_ONLY)
def test_boot_path_is_stdlib_only(rel: str) -> None:
    import sys

    for mod in imported_modules(SRC / rel):
        root = top(mod)
        assert root in sys.stdlib_module_names or root == "trainmedic", f"{rel} imports {mod}"


def collector_files() -> list[Path]:
    files: list[Path] = []
    for name in COLLECTOR_CODE:
        package, module = SRC / name, SRC / f"{name}.py"
        if package.is_dir():
            files += sorted(package.rglob("*.py"))
        if module.is_file():
            files.append(module)
    return files


@pytest.mark.parametrize("path", collector_files(), ids=lambda p: str(p.relative_to(SRC)))
def test_collectors_never_import_renderers_or_the_cli(path: Path) -> None:
    for mod in imported_modules(path):
        parts = mod.split(".")
        assert not (parts[0] == "trainmedic" and len(parts) > 1 and parts[1] in RENDERERS_AND_CLI), mod


def test_the_collector_check_sees_the_collectors() -> None:
    files = {str(p.relative_to(SRC)) for p in collector_files()}
    assert {"supervise/supervisor.py", "instrument/bootstrap.py", "diagnose/loader.py"} <= files
    assert len(files) > 40


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


def _builds_a_finding(node: ast.AST) -> bool:
    """`SPEC.finding(...)`, `Finding(...)` or `FindingSpec(...)`: wording or defining a finding."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in {"finding", "Finding", "FindingSpec"}


def test_only_a_findings_own_file_words_or_defines_it() -> None:
    """One finding, one place: outside rules/, collectors measure and hand evidence to the
    finding's file (its `judge` or its event rules); none builds a message or a spec."""
    offenders = [
        f"{path.relative_to(SRC)}:{node.lineno}"
        for path in sorted(SRC.rglob("*.py"))
        if path.relative_to(SRC).parts[0] != "rules" and path.name != "findings.py"
        for node in ast.walk(ast.parse(path.read_text()))
        if _builds_a_finding(node)
    ]
    assert offenders == []


MAX_MODULE_LINES = 500
MAX_CLASS_LINES = 250


def test_modules_and_classes_stay_small() -> None:
    """One job a module, one job a class: past these sizes a unit is doing several."""
    too_long = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text()
        if text.count("\n") > MAX_MODULE_LINES:
            too_long.append(f"{path.relative_to(SRC)}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_CLASS_LINES:
                    too_long.append(f"{path.relative_to(SRC)}: class {node.name} {lines} lines")
    assert too_long == []


def test_no_private_name_crosses_a_module() -> None:
    """`from trainmedic.x import _y` names a private module of a package, never a private
    function or class of another module: what others need is public where it lives."""
    crossings = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (
                isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("trainmedic")
            ):
                continue
            package = SRC.parent.joinpath(*node.module.split("."))
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                is_module = (package / f"{alias.name}.py").exists() or (package / alias.name).is_dir()
                if private and not is_module:
                    crossings.append(f"{path.relative_to(SRC)}:{node.lineno} {node.module}.{alias.name}")
    assert crossings == []


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: at module level and inside functions; those under
    `if TYPE_CHECKING:` are for the type checker only and never execute."""
    found: list[ast.Import | ast.ImportFrom] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        todo.extend(child for child in ast.iter_child_nodes(node) if not _type_checking_only(child))
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the trainmedic modules it imports (the deepest module each import names: `from
    trainmedic.x import y` is an edge to `trainmedic.x.y` where that is a module, else to
    `trainmedic.x`; a package's `__init__` importing its own submodule is an edge like any other)."""
    paths = {_module_name(p): p for p in SRC.rglob("*.py")}

    def known(name: str) -> str:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _runtime_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join([*parts[: len(parts) - node.level + 1], *([base] if base else [])])
                targets = [f"{base}.{alias.name}" for alias in node.names]
            graph[name].update(known(t) for t in targets if t.startswith("trainmedic") and known(t))
        graph[name].discard(name)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module: the import cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top_node = stack.pop()
                on_stack.discard(top_node)
                group.append(top_node)
                if top_node == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph()  # one parse of the package for the tests below


def test_the_cycle_finder_sees_a_cycle(graph: dict[str, set[str]]) -> None:
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}) == [
        ["a", "b", "c"]
    ]
    assert "trainmedic.torch._guard" in graph["trainmedic.torch"]  # a package's __init__ counts
    assert "trainmedic.llm.batches" in graph["trainmedic.llm"]  # an import inside a function counts
    assert "trainmedic.torch._interface" not in graph["trainmedic.torch._forward"]  # under TYPE_CHECKING


def test_no_import_cycle_between_modules(graph: dict[str, set[str]]) -> None:
    """Imports point one way, lazy ones in functions included: a module that must import its
    importer back is two modules doing one job, or a lower one calling up (hand it a callable,
    or move what both need into a module of its own)."""
    cycles = [
        f"{', '.join(group)}: "
        + "; ".join(f"{a} -> {b}" for a in group for b in sorted(graph[a] & set(group)))
        for group in strongly_connected(graph)
    ]
    assert cycles == []


#: A module outside rules/ that imports this many finding files keeps a list of findings: what
#: runs where is derived from the findings' declarations (`registry.rules_for`, `specs_for`).
MAX_FINDING_IMPORTS = 5
_FINDING_MODULE = re.compile(r"^trainmedic\.rules\.[a-z]{3}\.[a-z]{3}[0-9]{3}_[a-z0-9_]+$")
_GROUP_PACKAGE = re.compile(r"^trainmedic\.rules\.[a-z]{3}$")


def finding_imports(path: Path) -> set[str]:
    """The finding files a module imports, however it names them (`from trainmedic.rules.tor
    import tor001_x`, `from trainmedic.rules.tor.tor001_x import OBSERVATION`, `import ...`), and the
    group packages it imports whole (`from trainmedic.rules import tor`: its findings, a list)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            names = [n for n in names if n != node.module or _FINDING_MODULE.match(n)]
        else:
            continue
        for name in names:
            if _FINDING_MODULE.match(name) or _GROUP_PACKAGE.match(name):
                found.add(name)
            elif _FINDING_MODULE.match(name.rsplit(".", 1)[0]):
                found.add(name.rsplit(".", 1)[0])
    return found


def test_no_module_outside_rules_keeps_a_list_of_findings() -> None:
    """Importing a finding or two to call its `judge` where the evidence is measured is the
    design; a module that imports six or more keeps a hand list of what runs where."""
    lists = {
        str(path.relative_to(SRC)): len(imports)
        for path in sorted(SRC.rglob("*.py"))
        if path.relative_to(SRC).parts[0] != "rules"
        and (
            len(imports := finding_imports(path)) > MAX_FINDING_IMPORTS
            or any(_GROUP_PACKAGE.match(name) for name in imports)
        )
    }
    assert lists == {}, "derive the list from the registry (registry.rules_for / specs_for)"


def test_the_list_check_sees_the_finding_imports() -> None:
    hygiene = finding_imports(SRC / "torch" / "_hygiene.py")
    assert "trainmedic.rules.tor.tor003_grads_not_zeroed" in hygiene
    assert "trainmedic.rules.tor.tor001_frozen_parameters" in finding_imports(SRC / "llm" / "params.py")
