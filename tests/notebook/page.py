"""An executed notebook as one HTML page laid out like Jupyter's (input prompt, code, outputs),
so the inline findings are seen in Chromium the way a notebook shows them."""

from __future__ import annotations

import html
from collections.abc import Sequence

STYLE = """
body { margin: 12px; font-family: system-ui, sans-serif; background: #fff; }
.cell { display: grid; grid-template-columns: 64px 1fr; margin: 6px 0; }
.prompt { color: #303f9f; font: 13px monospace; padding-top: 6px; }
pre.code { background: #f7f7f7; border: 1px solid #e0e0e0; margin: 0; padding: 6px; font-size: 13px; }
pre.stream { margin: 4px 0; font-size: 13px; }
"""


def notebook_page(cells: Sequence[dict]) -> str:
    parts = [f"<!doctype html><meta charset=utf-8><style>{STYLE}</style>"]
    for cell in cells:
        count = cell.get("execution_count") or " "
        parts.append(
            f"<div class=cell><div class=prompt>[{count}]:</div>"
            f"<pre class=code>{html.escape(cell['source'])}</pre></div>"
        )
        outputs = []
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                outputs.append(f"<pre class=stream>{html.escape(out['text'])}</pre>")
            elif "text/html" in out.get("data", {}):
                outputs.append(out["data"]["text/html"])  # the kernel's own HTML, as Jupyter shows it
        if outputs:
            parts.append(f"<div class=cell><div></div><div class=outputs>{''.join(outputs)}</div></div>")
    return "".join(parts)
