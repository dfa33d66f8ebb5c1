"""The inputs of the fine-tuning DAT examples: rows as TRL reads them from JSONL.

Plain data, so the findings' files stay free of I/O: the registry's example test writes each
split to a JSONL file and hands the files to `check data` (`check_finetune_report`), with the
tokenizer folder it builds when an example names one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The tiny chat model's tokenizer (examples/llm/tinylm.py) with a BOS token that it adds to
#: every text it encodes and that its chat template writes first, as Llama 3's does.
BOS_TEMPLATE_TOKENIZER = "tinylm-bos"


@dataclass(frozen=True, slots=True)
class FineTuneExample:
    """The input of a fine-tuning DAT example: the rows of each split (`train`, `val`, ...) and
    the tokenizer `check data` is given (None, or `BOS_TEMPLATE_TOKENIZER`)."""

    splits: Mapping[str, Sequence[Mapping[str, Any]]]
    tokenizer: str | None = None
