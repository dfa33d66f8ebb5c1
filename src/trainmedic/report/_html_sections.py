"""Text sections of the HTML report: how the run ended, findings, processes, environment, log.

Each function takes plain data (a RunRecord, findings, the manifest) and
returns an HTML fragment; everything user-controlled is escaped here. The
charts live in `_html_plots`.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trainmedic.errors import UsageError
from trainmedic.events import Epoch, ProcessExit, ProcessSpawn
from trainmedic.findings import Finding, Severity, sort_findings
from trainmedic.record import RunRecord
from trainmedic.registry import lookup
from trainmedic.report.explain import explain_text
from trainmedic.report.html_format import (
    EPOCH_DISPLAY_OFFSET,
    escape,
    fmt_bytes,
    fmt_duration,
    fmt_value,
)
from trainmedic.units import signal_name

OOM_CODE = "RUN001"
_SIGKILL = 9
_LOG_HIT = re.compile(r"Traceback|Error\b|error:|Exception|Killed|out of memory", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Outcome:
    """How the run ended, as the page's first sentence says it."""

    level: str  # ok | warning | error  (the verdict colour)
    sentence: str
    exit_code: int | None
    signal: int | None
    duration_s: float | None
    killed_at: float | None  # wall time of a kill, for the timeline marker
    oom: bool


def outcome(record: RunRecord, findings: Sequence[Finding]) -> Outcome:
    """One sentence from RunStart/RunEnd and the findings: status, phase, duration."""
    start, end = record.start, record.end
    codes = {f.code for f in findings}
    worst = sort_findings(findings)[0] if findings else None
    if end is None:
        last = record.events[-1].t if record.events else None
        seen = fmt_duration(last - start.t) if start and last else "-"
        sentence = (
            "No end was recorded (the run is still going, or its supervisor was killed); "
            f"events cover {seen}."
        )
        return Outcome("warning", sentence, None, None, None, None, OOM_CODE in codes)
    duration = end.duration_s or (end.t - start.t if start else None)
    sig = end.signal if end.signal is not None else (end.exit_code - 128 if end.exit_code > 128 else None)
    where = _where_it_ended(record, end.t)
    took = f"after {fmt_duration(duration)}"
    status = f"exit status {end.exit_code}"
    oom = OOM_CODE in codes
    if oom:
        text = f"Killed by the OOM killer ({signal_name(sig or _SIGKILL)}, {status}){where} {took}."
    elif sig is not None:
        text = f"Killed by {signal_name(sig)} ({status}){where} {took}."
    elif end.exit_code != 0:
        text = f"Failed with {status}{where} {took}."
    elif worst is not None and worst.severity is Severity.ERROR:
        text = f"Exited normally ({status}) {took}, but trainmedic found a problem: {worst.message}"
    else:
        text = f"Finished normally ({status}) {took}."
    level = "error" if end.exit_code != 0 or (worst and worst.severity is Severity.ERROR) else "ok"
    if level == "ok" and worst is not None and worst.severity is Severity.WARNING:
        level = "warning"
    killed_at = end.t if sig is not None else None
    return Outcome(level, text, end.exit_code, sig, duration, killed_at, oom)


def _where_it_ended(record: RunRecord, t: float) -> str:
    """The innermost phase open at t; its epoch, or that of another open span of the same phase
    (the trainer's own phase events carry the epoch, phases read from its log may not)."""
    spans = [s for s in record.phase_spans if s.start <= t and (s.end is None or t <= s.end + 1.0)]
    if not spans:
        return ""
    spans.sort(key=lambda s: s.start, reverse=True)
    phase = spans[0].phase
    epoch = next((s.epoch for s in spans if s.phase == phase and s.epoch is not None), None)
    return f" during {phase.replace('_', ' ')}" + (
        f" (epoch {epoch + EPOCH_DISPLAY_OFFSET})" if epoch is not None else ""
    )


def header(title: str, record: RunRecord) -> str:
    start = record.start
    lines = [f"<h1>{escape(title)}</h1>"]
    if start is not None:
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(start.t))
        node = f" · {escape(start.node)}" if start.node else ""
        attempt = f" · attempt {start.attempt}" if start.attempt else ""
        lines.append(f'<div class="meta">started {when}{node}{attempt}</div>')
        if start.command:
            lines.append(f'<div class="meta"><code>$ {escape(shlex.join(start.command))}</code></div>')
    return "\n".join(lines)


def ending_section(record: RunRecord, findings: Sequence[Finding], result: Outcome) -> str:
    counts = {s: sum(1 for f in findings if f.severity is s) for s in Severity}
    stats = [
        ("exit status", "-" if result.exit_code is None else str(result.exit_code)),
        ("signal", signal_name(result.signal) if result.signal is not None else "none"),
        ("duration", fmt_duration(result.duration_s)),
        ("epochs", _epochs(record)),
        ("steps", f"{record.steps_run:,}" if record.steps or record.logged_steps else "-"),
        ("peak memory (RSS)", fmt_bytes(record.peak_rss)),
        (
            "findings",
            f"{_plural(counts[Severity.ERROR], 'error')}, {_plural(counts[Severity.WARNING], 'warning')}",
        ),
    ]
    cells = "".join(f'<div class="stat"><b>{escape(v)}</b><span>{escape(k)}</span></div>' for k, v in stats)
    return (
        '<section id="ending"><h2>How the run ended</h2>'
        f'<p class="verdict {result.level}" data-outcome="{result.level}">{escape(result.sentence)}</p>'
        f'<div class="stats">{cells}</div></section>'
    )


def summary_section(findings: Sequence[Finding]) -> str:
    """The first sentence of a page of findings without a run (a data check, a log read)."""
    counts = {s: sum(1 for f in findings if f.severity is s) for s in Severity}
    worst = sort_findings(findings)[0] if findings else None
    if worst is None:
        level, sentence = "ok", "No findings: nothing trainmedic checks for went wrong."
    else:
        level = "error" if worst.severity is Severity.ERROR else "warning"
        if worst.severity is Severity.INFO:
            level = "ok"
        found = ", ".join(_plural(counts[s], s.value) for s in Severity)
        sentence = f"trainmedic found {found}. The worst: {worst.message}"
    return (
        '<section id="ending"><h2>Summary</h2>'
        f'<p class="verdict {level}" data-outcome="{level}">{escape(sentence)}</p></section>'
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _epochs(record: RunRecord) -> str:
    """Epochs completed (of those asked); '-' for a loop that reports none and was asked none."""
    done, asked = record.epochs_completed, record.epochs_requested
    if asked:
        return f"{done} of {asked}"
    return str(done) if record.of_type(Epoch) else "-"


def findings_section(findings: Sequence[Finding]) -> str:
    out = ['<section id="findings"><h2>Findings</h2>']
    if not findings:
        out.append("<p>No findings: nothing trainmedic checks for went wrong in this run.</p>")
    for severity in Severity:
        group = [f for f in sort_findings(findings) if f.severity is severity]
        if group:
            out.append(f"<h3>{severity.value.capitalize()}s ({len(group)})</h3>")
            out.extend(finding_card(f, i) for i, f in enumerate(group))
    out.append("</section>")
    return "\n".join(out)


def finding_card(finding: Finding, index: int) -> str:
    sev = finding.severity.value
    where = " · ".join(f"{name} {escape(str(value))}" for name, value in finding.location())
    evidence = "".join(
        f"<tr><th>{escape(str(k))}</th><td class='mono'>{escape(_evidence_value(str(k), v))}</td></tr>"
        for k, v in finding.evidence.items()
    )
    parts = [
        f'<article class="finding {sev}" id="{sev}-{index}" data-code="{escape(finding.code)}">',
        f'<h3><span class="badge {sev}">{sev}</span> <code>{escape(finding.code)}</code> '
        f"{escape(finding.slug)}</h3>",
        f'<div class="where">{where}</div>' if where else "",
        f"<p>{escape(finding.message)}</p>",
        f'<div class="scroll"><table class="kv evidence">{evidence}</table></div>' if evidence else "",
        f'<p class="fix"><b>Fix:</b> {escape(finding.fix)}</p>' if finding.fix else "",
        _explain(finding.code),
        "</article>",
    ]
    return "".join(parts)


def _evidence_value(key: str, value: Any) -> str:
    """Evidence as stored (machine-readable), with bytes also said in GiB/MiB for the reader."""
    shown = fmt_value(value, limit=240)
    if key.endswith("bytes") and isinstance(value, int) and not isinstance(value, bool) and value >= 1024:
        shown += f" ({fmt_bytes(value)})"
    return shown


def _explain(code: str) -> str:
    """`trainmedic explain CODE`, embedded; nothing for a code this version does not know."""
    try:
        spec = lookup(code)
    except UsageError:
        return ""
    return (
        f"<details><summary>trainmedic explain {escape(code)}</summary>"
        f"<pre>{escape(explain_text(spec))}</pre></details>"
    )


def process_section(record: RunRecord) -> str:
    nodes: dict[int, dict[str, Any]] = {}
    for spawn in record.of_type(ProcessSpawn):
        info = nodes.setdefault(spawn.pid, {"ppid": None, "cmd": [], "role": "unknown", "rank": None})
        info["ppid"] = info["ppid"] if spawn.ppid is None else spawn.ppid
        info["cmd"] = info["cmd"] or spawn.cmdline
        info["rank"] = info["rank"] if spawn.rank is None else spawn.rank
        if spawn.role not in ("unknown", "python") or info["role"] == "unknown":
            info["role"] = spawn.role
    exits = {e.pid: e for e in record.of_type(ProcessExit)}
    if not nodes:
        return '<section id="processes"><h2>Processes</h2><p>No process events were recorded.</p></section>'
    children: dict[int | None, list[int]] = {}
    for pid, info in nodes.items():
        parent = info["ppid"] if info["ppid"] in nodes else None
        children.setdefault(parent, []).append(pid)

    def subtree(parent: int | None, depth: int) -> str:
        items = []
        for pid in sorted(children.get(parent, [])):
            info = nodes[pid]
            rank = f" · rank {info['rank']}" if info["rank"] is not None else ""
            items.append(
                f'<li data-role="{escape(info["role"])}">'
                f'<span class="badge role">{escape(info["role"])}</span> '
                f"pid {pid}{rank}{_exit_text(exits.get(pid))}"
                f'<div class="cmd">{escape(_short_cmd(info["cmd"]))}</div>'
                f"{subtree(pid, depth + 1) if depth < 20 else ''}</li>"
            )
        return f"<ul class='tree'>{''.join(items)}</ul>" if items else ""

    return f'<section id="processes"><h2>Processes</h2>{subtree(None, 0)}</section>'


def _exit_text(exit_: ProcessExit | None) -> str:
    if exit_ is None:
        return ""
    if exit_.signal is not None:
        return f" · killed by {escape(signal_name(exit_.signal))}"
    return f" · exit {exit_.exit_code}" if exit_.exit_code is not None else ""


def _short_cmd(cmd: Sequence[str], limit: int = 300) -> str:
    text = shlex.join(cmd) if cmd else "(command line unknown)"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def log_section(lines: Sequence[str]) -> str:
    if not lines:
        return '<section id="log"><h2>Log</h2><p>No output was recorded.</p></section>'
    shown = "\n".join(
        f'<span class="hit">{escape(line)}</span>' if _LOG_HIT.search(line) else escape(line)
        for line in lines
    )
    return (
        '<section id="log"><h2>Log</h2><p class="meta">The last lines of output.log, '
        f'around the failure ({len(lines)} lines).</p><pre class="log">{shown}</pre></section>'
    )
