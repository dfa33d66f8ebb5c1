"""The documentation of one finding as plain text: what `trainmedic explain` prints.

It lives with the renderers so the HTML report, SARIF and the CLI share one
wording without the report importing the CLI (imports point cli -> report).
"""

from __future__ import annotations

from trainmedic.findings import FindingSpec


def explain_text(spec: FindingSpec) -> str:
    """The documentation as plain text; the HTML report embeds the same text."""
    return (
        f"{spec.code} {spec.slug} ({spec.severity.value}): {spec.title}\n\n"
        f"What it means\n  {spec.what}\n\n"
        f"Why it hurts\n  {spec.why}\n\n"
        f"Example\n  " + spec.example.replace("\n", "\n  ") + "\n\n"
        f"Fix\n  {spec.fix}\n"
    )
