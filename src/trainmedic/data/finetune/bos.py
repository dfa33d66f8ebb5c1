"""DAT020's measure: rows that start with two BOS tokens once tokenized as TRL tokenizes them.

TRL tokenizes a plain string (a `text` row, a prompt and its completion or responses) with the
tokenizer's call, special tokens added: a text that already starts with the BOS string (it
was rendered with a chat template that writes BOS) gets a second one. The served start is a
probe prompt through `apply_chat_template(..., add_generation_prompt=True, tokenize=True)`
(the tokenizer's call without a chat template). Conversational rows are rendered and
tokenized by TRL in one step (`apply_chat_template(tokenize=True)`, one BOS): they are not
counted; when the template writes BOS and the tokenizer adds one, the summary notes that a
script of the user's own must not tokenize their rendered text with special tokens.
Cost: one tokenization of the first `PREFIX_CHARS` characters of up to `SAMPLE` rows a split.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainmedic.data.finetune.contents import located, noun
from trainmedic.data.finetune.reader import Example, FineTuneSet
from trainmedic.findings import Finding
from trainmedic.rules.dat import dat020_double_bos as dat020

SAMPLE = 2000  # rows a split, evenly spaced: how a file was rendered is a property of the whole file
PREFIX_CHARS = 256  # the start of a row is all that decides its first two tokens
_PROBE = [{"role": "user", "content": "trainmedic probe question 17"}]


def double_bos_findings(sets: list[FineTuneSet], tokenizer: Any) -> list[Finding]:
    """DAT020 for every training split's plain rows."""
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None:
        return []
    served, served_with = served_start(tokenizer)
    findings: list[Finding] = []
    for split in (s for s in sets if s.name != "serving"):
        plain = [e for e in _spread(split.examples) if not e.conversational]
        if not plain:
            continue
        ids = tokenizer([_start(e) for e in plain], add_special_tokens=True)["input_ids"]
        doubled = [e for e, row in zip(plain, ids, strict=True) if list(row[:2]) == [bos, bos]]
        evidence = dat020.DoubleBos(
            split=split.name,
            noun=noun(split),
            rows=len(plain),
            doubled=len(doubled),
            bos=str(tokenizer.bos_token),
            served_bos=leading(served, bos),
            served_with=served_with,
            where=located(split, doubled),
        )
        findings += dat020.judge(evidence)
    return findings


def conversational_note(sets: list[FineTuneSet], tokenizer: Any) -> list[str]:
    """The hazard a conversational set carries when the template writes BOS and the tokenizer's
    call adds it: TRL is safe, a script that tokenizes the rendered text itself is not."""
    bos = getattr(tokenizer, "bos_token_id", None)
    conversational = any(e.conversational for s in sets for e in s.examples[:1])
    if bos is None or not conversational or not getattr(tokenizer, "chat_template", None):
        return []
    try:
        rendered = str(tokenizer.apply_chat_template(_PROBE, tokenize=False, add_generation_prompt=True))
    except Exception:  # a template that rejects the probe: nothing to say
        return []
    adds = leading(tokenizer("a", add_special_tokens=True)["input_ids"], bos) > 0
    if not (adds and rendered.startswith(str(tokenizer.bos_token))):
        return []
    return [
        f"the chat template writes BOS ({tokenizer.bos_token!r}) and the tokenizer adds it: TRL "
        "tokenizes conversational rows with apply_chat_template (one BOS); a script that tokenizes "
        "their rendered text itself needs add_special_tokens=False"
    ]


def served_start(tokenizer: Any) -> tuple[list[int], str]:
    """The first ids of a served prompt, and how it was served."""
    if getattr(tokenizer, "chat_template", None):
        try:
            out = tokenizer.apply_chat_template(_PROBE, tokenize=True, add_generation_prompt=True)
            return _ids(out), "apply_chat_template(tokenize=True)"
        except Exception:  # a template that rejects the probe: serve the text as it is
            pass
    return _ids(tokenizer(_PROBE[0]["content"], add_special_tokens=True)), "tokenizer(prompt)"


def _ids(out: Any) -> list[int]:
    """Token ids from what a tokenizer returns: a list, or a mapping with `input_ids`."""
    ids = out["input_ids"] if not isinstance(out, list) else out
    if ids and isinstance(ids[0], list):  # a batch of one
        ids = ids[0]
    return [int(i) for i in ids]


def leading(ids: Sequence[int], bos: int) -> int:
    """How many times `bos` starts `ids` (the guard's DPO watch counts served starts with it too)."""
    n = 0
    for token in ids:
        if token != bos:
            break
        n += 1
    return n


def _start(example: Example) -> str:
    text = "".join(content for _, content in example.prompt + example.completion)
    return text[:PREFIX_CHARS]


def _spread(examples: list[Example]) -> list[Example]:
    if len(examples) <= SAMPLE:
        return examples
    step = len(examples) / SAMPLE
    return [examples[int(i * step)] for i in range(SAMPLE)]
