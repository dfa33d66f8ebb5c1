"""The report's environment section: the run's `manifest.json` as tables a person scans.

The manifest is written for machines (`trainmedic diff` compares two of them key by key); a
person reading a report wants the few facts that explain a run: what ran where, on which
Python, frameworks and GPUs, from which commit, and what the supervisor itself cost. So the
known keys are grouped and worded (a missing GPU is "none found", not `null`; bytes are MiB
and GiB), what nobody recorded is left out, the package list is folded away, and any key
this page does not know is still shown, in a last table, so nothing recorded is hidden.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping
from typing import Any

from trainmedic.report.html_format import escape, fmt_bytes, fmt_duration, fmt_value
from trainmedic.units import signal_name

Rows = list[tuple[str, str]]

# Keys the page reads (or leaves out on purpose: `schema`, `created` repeats `start`)
_SKIPPED = {"schema", "created", "packages", "supervisor_pid"}


def environment_section(manifest: Mapping[str, Any]) -> str:
    head = '<section id="environment"><h2>Environment</h2>'
    if not manifest:
        return head + "<p>No manifest.json in this run folder.</p></section>"
    out = [head]
    shown: set[str] = set(_SKIPPED)
    for title, keys, read in _GROUPS:
        shown.update(keys)
        table = [(k, v) for k, v in read(manifest) if v]
        if table:
            out.append(f"<h3>{title}</h3>{_table(table)}")
    other = [(k, _any(v)) for k, v in manifest.items() if k not in shown and v not in (None, "", [], {})]
    if other:
        out.append(f"<h3>Other</h3>{_table(other)}")
    packages = manifest.get("packages")
    if isinstance(packages, Mapping) and packages:
        listed = _table([(str(k), str(v)) for k, v in sorted(packages.items())])
        out.append(f"<details><summary>{len(packages)} installed packages</summary>{listed}</details>")
    out.append("</section>")
    return "".join(out)


def _run(m: Mapping[str, Any]) -> Rows:
    command = m.get("command")
    exit_code, signal = m.get("exit_code"), m.get("signal")
    ended = None if exit_code is None else f"exit status {exit_code}"
    if isinstance(signal, int):
        ended = f"{ended}, {signal_name(signal)}" if ended else signal_name(signal)
    limit = m.get("memory_limit_bytes")
    return [
        ("command", shlex.join(command) if isinstance(command, list) else _any(command)),
        ("folder", _any(m.get("cwd"))),
        ("where", " as ".join(str(v) for v in (m.get("host"), m.get("user")) if v)),
        ("started", _any(m.get("start"))),
        ("ended", _any(m.get("end"))),
        ("duration", fmt_duration(m["duration_s"]) if isinstance(m.get("duration_s"), (int, float)) else ""),
        ("how", ended or ""),
        ("attempts", _any(m.get("attempts")) if m.get("attempts", 1) != 1 else ""),
        ("trainer PIDs", ", ".join(str(p) for p in m.get("trainer_pids") or [])),
        ("memory limit", fmt_bytes(limit) if isinstance(limit, int) else ""),
        ("trainmedic", _any(m.get("trainmedic"))),
    ]


def _machine(m: Mapping[str, Any]) -> Rows:
    os_ = m.get("os") or {}
    cpu = m.get("cpu") or {}
    memory = m.get("memory_bytes")
    cores = ", ".join(
        f"{cpu[k]} {label}"
        for k, label in (("cores_logical", "logical"), ("cores_physical", "physical"), ("affinity", "usable"))
        if cpu.get(k)
    )
    return [
        ("system", _any(os_.get("platform") or os_.get("system"))),
        ("CPU", " · ".join(v for v in (_any(cpu.get("model")), cores) if v)),
        ("memory", fmt_bytes(memory) if isinstance(memory, int) else ""),
        ("GPUs", _gpus(m.get("gpus"))),
    ]


def _gpus(gpus: Any) -> str:
    if not gpus:
        return "none found (no NVIDIA driver answered)"
    if "error" in gpus:
        return f"not read: {gpus['error']}"
    devices = [
        f"{d.get('index')}: {d.get('name')} "
        f"({fmt_bytes(d.get('memory_bytes'))}, compute capability {d.get('compute_capability')})"
        for d in gpus.get("devices", [])
    ]
    driver = f"driver {gpus.get('driver')}, CUDA {gpus.get('cuda_driver')}"
    return "; ".join([*devices, driver]) if devices else f"none ({driver})"


def _software(m: Mapping[str, Any]) -> Rows:
    python = m.get("python") or {}
    rows = [
        (
            "Python",
            " ".join(str(python[k]) for k in ("implementation", "version", "executable") if python.get(k)),
        )
    ]
    for name, info in (m.get("frameworks") or {}).items():
        if isinstance(info, Mapping):
            extras = ", ".join(
                f"{k} {v}" for k, v in info.items() if k != "version" and v not in (None, False)
            )
            rows.append((str(name), f"{info.get('version', '')}" + (f" ({extras})" if extras else "")))
        else:
            rows.append((str(name), _any(info)))
    rows.append(("git", _git(m.get("git"))))
    return rows


def _git(git: Any) -> str:
    if not git:
        return "not a git repository"
    commit = str(git.get("commit") or "no commit yet")[:12]
    where = f"{commit} on {git['branch']}" if git.get("branch") else commit
    modified, untracked = _count(git.get("modified")), _count(git.get("untracked"))
    changes = (
        f"uncommitted changes: {modified} modified, {untracked} untracked" if git.get("dirty") else "clean"
    )
    return f"{where} · {changes}"


def _count(value: Any) -> int:
    """A count the manifest gives as a number (untracked files) or as the list itself (modified)."""
    return value if isinstance(value, int) else len(value or [])


def _reproducibility(m: Mapping[str, Any]) -> Rows:
    determinism = {k: v for k, v in (m.get("determinism") or {}).items() if v is not None}
    env = m.get("env") or {}
    data = m.get("data") or []
    return [
        ("determinism settings", ", ".join(f"{k}={v}" for k, v in determinism.items()) or "none set"),
        ("environment variables", ", ".join(f"{k}={v}" for k, v in env.items())),
        *(
            (
                f"data {d.get('path')}",
                f"{d.get('files')} files, {fmt_bytes(d.get('bytes'))}, sha256 {d.get('sha256')}",
            )
            for d in data
            if isinstance(d, Mapping)
        ),
    ]


def _supervisor(m: Mapping[str, Any]) -> Rows:
    own = m.get("supervisor") or {}
    report = own.get("report") or {}
    if report.get("status") == "written" and "seconds" in report:
        drawn = f"drawn in {report['seconds']:.1f} s, peak {fmt_bytes(report.get('peak_rss_bytes'))}"
    else:
        drawn = " ".join(str(v) for v in (report.get("status"), report.get("reason")) if v)
    after = own.get("after_exit_seconds")
    return [
        ("peak memory", fmt_bytes(own["peak_rss_bytes"]) if own.get("peak_rss_bytes") else ""),
        ("after the trainer's exit", f"{after:.1f} s" if isinstance(after, (int, float)) else ""),
        ("report", drawn),
    ]


_GROUPS: list[tuple[str, tuple[str, ...], Callable[[Mapping[str, Any]], Rows]]] = [
    (
        "Run",
        (
            *("command", "cwd", "host", "user", "name", "start", "end", "duration_s", "exit_code"),
            *("signal", "attempts", "trainer_pids", "memory_limit_bytes", "trainmedic"),
        ),
        _run,
    ),
    ("Machine", ("os", "cpu", "memory_bytes", "gpus"), _machine),
    ("Software", ("python", "frameworks", "git"), _software),
    ("Reproducibility", ("determinism", "env", "data"), _reproducibility),
    ("Supervisor", ("supervisor",), _supervisor),
]


def _any(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, Mapping):
        return json.dumps(value, default=str)[:2000]
    return fmt_value(value, limit=2000)


def _table(rows: Rows) -> str:
    cells = "".join(f"<tr><th>{escape(k)}</th><td class='mono'>{escape(v)}</td></tr>" for k, v in rows)
    return f'<div class="scroll"><table class="kv">{cells}</table></div>'
