"""The report's inline stylesheet, its one tiny script, and the Content-Security-Policy.

Everything is inline so the file opens offline and can be mailed or attached as
is. The policy forbids every fetch (`default-src 'none'`): should a future
change add an external font or image, the browser refuses it and says so in
the console, which the report's browser test turns into a failure.
"""

from __future__ import annotations

# Opens every <details> before printing, so the printed page carries the full
# `trainmedic explain` text; the only script in the page (no other behaviour needs one).
PRINT_SCRIPT = (
    'addEventListener("beforeprint",function(){'
    'document.querySelectorAll("details").forEach(function(d){d.open=true;});});'
)
# base64(sha256(PRINT_SCRIPT)), the policy's permit for it: a constant, so rendering a
# report does not import hashlib (tests/report/test_html_render.py recomputes it).
PRINT_SCRIPT_SHA256 = "qlvVGDwxe9U+FVNsnWudPOyxSKFjAaHGgLhy7Ao8AO4="


CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    f"script-src 'sha256-{PRINT_SCRIPT_SHA256}'; base-uri 'none'; form-action 'none'"
)

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#4b5563")

CSS = (
    """
:root{--fg:#1f2328;--muted:#59636e;--bg:#fff;--card:#f6f8fa;--line:#d1d9e0;
--err:#cf222e;--warn:#9a6700;--info:#0969da;--ok:#1a7f37;}
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--muted:#9198a1;--bg:#0d1117;--card:#161b22;
--line:#30363d;--err:#ff7b72;--warn:#d29922;--info:#58a6ff;--ok:#3fb950;}}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
color:var(--fg);background:var(--bg)}
main{max-width:980px;margin:0 auto;padding:16px}
h1{font-size:1.5rem;margin:.2em 0}
h2{font-size:1.2rem;margin:1.6em 0 .5em;padding-bottom:.2em;border-bottom:1px solid var(--line)}
h3{font-size:1rem;margin:1em 0 .3em}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;
font-size:.86em}
pre{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:10px;overflow-x:auto;
white-space:pre-wrap;word-break:break-word}
nav.toc{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:.9em}
nav.toc a{color:var(--info);text-decoration:none}
.meta{color:var(--muted);font-size:.9em;word-break:break-all}
.verdict{font-size:1.1rem;padding:12px 14px;border-radius:8px;border-left:6px solid var(--ok);
background:var(--card)}
.verdict.error{border-color:var(--err)}.verdict.warning{border-color:var(--warn)}
.badge{display:inline-block;padding:0 7px;border-radius:10px;font-size:.78em;font-weight:600;color:#fff;
vertical-align:middle}
.badge.error{background:var(--err)}.badge.warning{background:var(--warn)}.badge.info{background:var(--info)}
.badge.ok{background:var(--ok)}.badge.role{background:var(--muted)}
.finding{border:1px solid var(--line);border-left:5px solid var(--info);border-radius:6px;padding:8px 12px;
margin:10px 0;background:var(--bg);break-inside:avoid}
.finding.error{border-left-color:var(--err)}.finding.warning{border-left-color:var(--warn)}
.finding h3{margin:.1em 0}.finding .where{color:var(--muted);font-size:.85em}
.fix{margin:.4em 0}.fix b{color:var(--ok)}
table{border-collapse:collapse;width:100%;font-size:.88em}
th,td{text-align:left;vertical-align:top;padding:3px 8px;border-bottom:1px solid var(--line);
word-break:break-word}
th{color:var(--muted);font-weight:600}
table.kv th{width:34%}
.scroll{overflow-x:auto}
.stats{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:8px;margin:8px 0}
.stat{background:var(--card);border-radius:6px;padding:6px 10px}
.stat b{display:block;font-size:1.15rem}.stat span{color:var(--muted);font-size:.82em}
figure.chart{margin:12px 0;break-inside:avoid}
figure.chart figcaption{font-weight:600;font-size:.92em}
figure.chart svg{width:100%;height:auto;display:block;background:var(--bg)}
svg .frame{fill:none;stroke:var(--line)}
svg .grid{stroke:var(--line);stroke-width:.6;stroke-dasharray:2 3}
svg text{fill:var(--muted);font-size:11px;font-family:inherit}
svg .axis-label{font-size:11px;font-weight:600}
svg .line{fill:none;stroke-width:1.6;stroke-linejoin:round}
svg .line.dashed,.swatch.dashed{stroke-dasharray:5 3}
svg .dot{fill:var(--bg);stroke-width:1.6}
svg .hline{stroke:var(--err);stroke-width:1.4;stroke-dasharray:7 4}
svg .hline-label{fill:var(--err);font-weight:600}
svg .marker line{stroke-width:1.4}
svg .marker text{font-size:10.5px;font-weight:600}
svg .marker.oom line,svg .marker.nan line,svg .marker.finding-error line{stroke:var(--err)}
svg .marker.oom text,svg .marker.nan text,svg .marker.finding-error text{fill:var(--err)}
svg .marker.finding-warning line{stroke:var(--warn);stroke-dasharray:4 3}
svg .marker.finding-warning text{fill:var(--warn)}
svg .marker.finding-info line{stroke:var(--info);stroke-dasharray:2 3}
svg .marker.finding-info text{fill:var(--info)}
svg .marker.end line{stroke:var(--muted);stroke-dasharray:3 3}
svg .peak{fill:var(--err)}svg .peak-label{fill:var(--err);font-weight:600}
.legend{list-style:none;padding:0;margin:4px 0;display:flex;flex-wrap:wrap;gap:2px 14px;font-size:.82em}
.swatch{display:inline-block;width:18px;height:10px;margin-right:5px;vertical-align:middle;border-radius:2px}
.swatch.limit{height:0;border-top:2px dashed var(--err);border-radius:0}
.band-train{fill:#2563eb;background:#2563eb;opacity:.08}
.band-eval{fill:#ea580c;background:#ea580c;opacity:.2}
.band-epoch_end{fill:#9333ea;background:#9333ea;opacity:.2}
.band-checkpoint{fill:#16a34a;background:#16a34a;opacity:.22}
.band-predict{fill:#0891b2;background:#0891b2;opacity:.18}
.band-idle{fill:#6b7280;background:#6b7280;opacity:.12}
.legend .swatch[class*=band-]{opacity:.45}
ul.tree,ul.tree ul{list-style:none;padding-left:18px;margin:2px 0}
ul.tree{padding-left:0}
ul.tree li{margin:3px 0}
ul.tree .cmd{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.82em;color:var(--muted);
word-break:break-all}
pre.log .hit{color:var(--err);font-weight:600}
details summary{cursor:pointer;color:var(--info);font-size:.9em}
footer{margin:2em 0 1em;color:var(--muted);font-size:.8em}
@media (max-width:600px){body{font-size:14px}main{padding:10px}table.kv th{width:40%}
svg text,svg .axis-label{font-size:18px}svg .marker text{font-size:17px}}
@media print{body{font-size:11pt;background:#fff;color:#000}main{max-width:none;padding:0}
nav.toc{display:none}
h2{break-after:avoid}pre{white-space:pre-wrap}details>summary{display:none}
details:not([open])>*{display:block}}
"""
    + "".join(
        f"svg .s{i}{{stroke:{color}}}.swatch.s{i}{{background:{color}}}" for i, color in enumerate(PALETTE)
    )
    + "\n"
)
