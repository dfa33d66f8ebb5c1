"""`--tokenizer PATH`: a local tokenizer folder, loaded as a user loads it (nothing downloaded),
and the role markers of its chat template.

The markers come from a probe conversation (one user turn, one assistant turn with known
contents) rendered with `apply_chat_template`: what stands between the two contents is the
end of a user turn and the start of the assistant's (ChatML: `<|im_end|>\\n<|im_start|>assistant\\n`),
the part a prompt rendered for generation ends with and a training text in that template holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainmedic.errors import UsageError, install_hint

_PROBE_USER = "trainmedic probe question 17"
_PROBE_ASSISTANT = "trainmedic probe answer 23"

#: Other formats a training text or a served prompt may be written in, by their markers.
KNOWN_FORMATS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ChatML", re.compile(r"<\|im_start\|>")),
    ("Llama-3", re.compile(r"<\|start_header_id\|>")),
    ("Llama-2 [INST]", re.compile(r"\[INST\]")),
    ("Gemma", re.compile(r"<start_of_turn>")),
    ("Phi-3/Zephyr", re.compile(r"<\|(?:user|assistant)\|>")),
    ("Alpaca", re.compile(r"^\s*###\s*(?:Instruction|Response|Input)\s*:", re.MULTILINE)),
    ("### Question/Answer", re.compile(r"^\s*###\s*(?:Question|Answer)\s*:", re.MULTILINE)),
    ("Human/Assistant", re.compile(r"^\s*(?:###\s*)?Human\s*:.*^\s*(?:###\s*)?Assistant\s*:", re.M | re.S)),
    ("Vicuna USER/ASSISTANT", re.compile(r"^\s*USER\s*:.*\bASSISTANT\s*:", re.MULTILINE | re.DOTALL)),
)


@dataclass(frozen=True, slots=True)
class ChatTemplate:
    """The tokenizer's chat template as a text in it can be recognised."""

    name: str  # the known format it is, else "its own format"
    marker: str  # between a user turn's content and the assistant's

    def carried_by(self, text: str) -> bool:
        """The text holds the marker (whitespace aside: renderings differ in blank lines)."""
        return squeeze(self.marker) in squeeze(text)


def squeeze(text: str) -> str:
    return "".join(text.split())


def known_format(text: str) -> str | None:
    return next((name for name, pattern in KNOWN_FORMATS if pattern.search(text)), None)


def load_tokenizer(path: str) -> Any:
    """`AutoTokenizer.from_pretrained(path, local_files_only=True)`; one line for a bad folder."""
    where = Path(path)
    expected = (
        "expected a local tokenizer folder (tokenizer_config.json, tokenizer.json), as save_pretrained writes"
    )
    if not where.is_dir():
        raise UsageError(f"--tokenizer {path}: no such folder; {expected}")
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise UsageError(f"--tokenizer needs transformers: {install_hint('transformers', 'hf')}") from None
    try:
        return AutoTokenizer.from_pretrained(str(where), local_files_only=True)
    except Exception as exc:  # transformers raises OSError, ValueError, KeyError... for a bad folder
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise UsageError(f"--tokenizer {path}: cannot load a tokenizer ({first}); {expected}") from None


def chat_template(tokenizer: Any) -> ChatTemplate | None:
    """The tokenizer's template's marker, None without a template or when it marks no roles."""
    if not getattr(tokenizer, "chat_template", None):
        return None
    probe = [{"role": "user", "content": _PROBE_USER}, {"role": "assistant", "content": _PROBE_ASSISTANT}]
    try:
        text = str(tokenizer.apply_chat_template(probe, tokenize=False))
    except Exception:  # a template that raises on this conversation: no markers to compare
        return None
    user, assistant = text.find(_PROBE_USER), text.find(_PROBE_ASSISTANT)
    if user < 0 or assistant < user:
        return None
    marker = text[user + len(_PROBE_USER) : assistant].strip()
    if not marker:
        return None
    return ChatTemplate(known_format(text) or "its own format", marker)


def render(tokenizer: Any, messages: list[dict[str, str]], *, generation_prompt: bool = False) -> str:
    return str(
        tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt)
    )
