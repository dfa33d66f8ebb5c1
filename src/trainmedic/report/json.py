"""JSON renderer: `{"findings": [...]}` with the stable field names of `Finding.to_dict`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from trainmedic.findings import Finding, findings_to_json


def render_json(findings: Sequence[Finding], out: TextIO) -> None:
    out.write(findings_to_json(findings) + "\n")
