"""Every catalogue entry's example runs: fed to the rules the way trainmedic applies them, it
fires that entry's code. An example that no longer triggers its rule is documentation that lies.

Event rules get `RunRecord.of(events)` through `registry.run_rules` (all rules, as `run` and
`diagnose` apply them). DAT checks read tables: their examples give plain columns, turned into
DataFrames here and passed to `trainmedic.data.check` (DAT013 to the input contract); the
fine-tuning ones give rows, written here to JSONL files for `check data` (with tinylm's
tokenizer when the example names one). ENV001 compares two environment manifests, as
`trainmedic diff` does.
"""

from __future__ import annotations

from typing import Any

import pytest

from trainmedic.findings import Finding, FindingSpec
from trainmedic.record import RunRecord
from trainmedic.registry import all_specs, run_rules

#: code -> why no small input triggers its rule. Keep it short; every entry is a gap.
SKIP: dict[str, str] = {}


def findings_of(given: Any) -> list[Finding]:
    """What trainmedic reports for an example's input, by the input's kind."""
    from trainmedic.rules._helpers.finetune import FineTuneExample
    from trainmedic.rules._helpers.tables import ContractExample, TablesExample
    from trainmedic.rules.env.env001_env_drift import ManifestPair

    if isinstance(given, FineTuneExample):
        return _finetune_findings(given)

    if isinstance(given, TablesExample):
        import pandas as pd

        from trainmedic.data import check

        frames = {name: pd.DataFrame(dict(columns)) for name, columns in given.splits.items()}
        return check(
            frames["train"],
            frames.get("val"),
            frames.get("test"),
            frames.get("serving"),
            label=given.label,
            group=given.group,
            time=given.time,
            id=given.id,
        )
    if isinstance(given, ContractExample):
        import pandas as pd

        from trainmedic import contract

        captured = contract.capture(pd.DataFrame(dict(given.trained_on)))
        return contract.check(captured, pd.DataFrame(dict(given.served)))
    if isinstance(given, ManifestPair):
        from trainmedic.rules.env.env001_env_drift import compare_manifests, judge

        drift = judge("a", "b", compare_manifests(given.a, given.b))
        return [drift] if drift is not None else []
    return run_rules(RunRecord.of(given))


def _finetune_findings(given: Any) -> list[Finding]:
    """The example's splits as JSONL files through `check data`'s fine-tuning checks."""
    import json
    import tempfile
    from pathlib import Path

    from trainmedic.data.finetune import check_finetune_report
    from trainmedic.rules._helpers.finetune import BOS_TEMPLATE_TOKENIZER

    from .conftest import load_tinylm

    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for name, rows in given.splits.items():
            paths[name] = Path(tmp) / f"{name}.jsonl"
            paths[name].write_text("".join(json.dumps(dict(row)) + "\n" for row in rows))
        tokenizer = None
        if given.tokenizer == BOS_TEMPLATE_TOKENIZER:
            pytest.importorskip("transformers")
            tokenizer = str(Path(tmp) / "tokenizer")
            load_tinylm().make_bos_tokenizer(Path(tokenizer))
        named = {k: str(v) for k, v in paths.items()}
        return check_finetune_report(
            named["train"], named.get("val"), named.get("test"), named.get("serving"), tokenizer=tokenizer
        ).findings


@pytest.mark.parametrize("spec", all_specs(), ids=lambda s: s.code)
def test_the_example_fires_its_code(spec: FindingSpec) -> None:
    if spec.code in SKIP:
        pytest.skip(SKIP[spec.code])
    assert spec.example_input is not None, f"{spec.code} has no example_input (or a SKIP entry)"
    codes = [f.code for f in findings_of(spec.example_input())]
    assert spec.code in codes, f"{spec.code}'s example gave {codes}"


def test_skips_name_known_codes_and_say_why() -> None:
    known = {s.code for s in all_specs()}
    for code, reason in SKIP.items():
        assert code in known, code
        assert len(reason) > 20, code
