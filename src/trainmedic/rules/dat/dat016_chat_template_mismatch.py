"""DAT016 `chat-template-mismatch`: the text trained on is not what the chat template serves.

Collectors:
- `trainmedic check data` (`trainmedic.data.finetune.templates`) names the format each
  training example and each served prompt is written in (the tokenizer's chat template, whose
  role markers it takes from a probe conversation rendered with `apply_chat_template`; a
  known other format: Alpaca, Llama-2 `[INST]`, ChatML, ...; or no chat markers) and sends
  `TemplateFormats` with the majority of each side;
- the in-process guard (`trainmedic.llm.templates`) sees a script train on text without the
  tokenizer's chat markers and then render prompts with `apply_chat_template`: it observes
  `GUARD_OBSERVATION` with `examples_checked`, `with_template` (training examples that carry the
  tokenizer's markers), `served_with` and a sample of each side (<= 200 characters).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainmedic.events import Event
from trainmedic.findings import Finding, FindingSpec, Severity
from trainmedic.record import Rule, RunRecord
from trainmedic.rules._helpers.guard import observation_rule, observed

#: The guard's observation this finding words.
GUARD_OBSERVATION = "chat_template_mismatch"

SAMPLE_CHARS = 200  # the most characters of a sample the evidence keeps

#: The format names `TemplateFormats` uses beside the known formats' own names.
TOKENIZER_TEMPLATE = "the tokenizer's chat template"
NO_MARKERS = "no chat markers"
UNKNOWN = "unknown"  # messages without --tokenizer: rendered by a template not at hand

# A side is written in a format when most of its examples are: a few odd rows (a system
# prompt quoting '### Instruction:', a raw row among rendered ones) do not make it a mismatch.
MAJORITY = 0.5


def _guard_example() -> list[Event]:
    """Alpaca-style training text, prompts served through a ChatML chat template."""
    return observed(
        GUARD_OBSERVATION,
        examples_checked=64,
        with_template=0,
        served_with="apply_chat_template",
        train_sample="### Instruction:\nName a colour.\n\n### Response:\nBlue.",
        served_sample="<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\n",
    )


SPEC = FindingSpec(
    code="DAT016",
    slug="chat-template-mismatch",
    severity=Severity.WARNING,
    title="Chat template mismatch",
    what=(
        "The text a model is trained on is not what its tokenizer's chat template produces for the "
        "prompts it serves: e.g. training text in an Alpaca `### Instruction:` or Llama-2 `[INST]` "
        "format, prompts rendered with `tokenizer.apply_chat_template` (ChatML) at evaluation or "
        "inference, or the other way round."
    ),
    why=(
        "The model learns to answer after the markers of the training format; at inference it "
        "sees other markers (other special tokens, another role layout) and answers like the base "
        "model, runs on, or never emits the end-of-turn token it learned to stop at. The training "
        "loss looks fine; only the served model is off. trainmedic renders a probe conversation "
        "with the tokenizer's chat template, takes the role markers around the probe contents, "
        "and counts the training texts and served prompts that carry them."
    ),
    example=(
        "SFTTrainer on a 'text' column formatted as '### Instruction:\\n...\\n\\n### Response:\\n...',\n"
        "then model.generate(tokenizer.apply_chat_template(messages, add_generation_prompt=True))"
    ),
    fix=(
        "Render training and serving with the same template: give SFTTrainer conversational data "
        "(a `messages` column) so it applies `tokenizer.apply_chat_template` itself, or serve with "
        "the training format (the same prompt string, not apply_chat_template); when the format "
        "is meant to differ, set `tokenizer.chat_template` to the training format."
    ),
    decided_in=("run events", "torch guard", "fine-tune data"),
    example_input=_guard_example,
)


@dataclass(frozen=True, slots=True)
class TemplateFormats:
    """`check data`: the format most training examples and most served prompts are written in."""

    tokenizer_format: str | None  # the tokenizer's template by its known name; None: no --tokenizer
    markers: list[str]  # the tokenizer's role markers, from a rendered probe conversation
    train_format: str  # TOKENIZER_TEMPLATE, a known format's name, NO_MARKERS or UNKNOWN
    train_share: float  # share of the training examples checked written in it
    train_examples: int  # training examples checked
    with_template: int  # training examples that carry the tokenizer's markers
    train_sample: str
    train_rendered: bool  # the training rows are text as trained on (not messages TRL renders)
    serving_format: str | None = None  # None: no --serving
    serving_share: float = 0.0
    serving_examples: int = 0
    serving_sample: str = ""


def mismatch(evidence: TemplateFormats) -> str | None:
    """Why the formats disagree (None: they do not, or it cannot be told)."""
    train, serving = evidence.train_format, evidence.serving_format
    if evidence.train_share < MAJORITY or train == UNKNOWN:
        return None
    if serving is not None:
        if evidence.serving_share < MAJORITY or serving in (train, UNKNOWN):
            return None
        if serving == NO_MARKERS:  # raw prompts: often sent to an endpoint that applies the template
            return None
        return "serving"
    rendered_otherwise = train not in (TOKENIZER_TEMPLATE, NO_MARKERS)
    if evidence.train_rendered and evidence.tokenizer_format is not None and rendered_otherwise:
        return "tokenizer"
    return None


def _data_message(evidence: TemplateFormats, why: str) -> str:
    train = f"{evidence.train_share:.0%} of the {evidence.train_examples:,} training examples"
    trained_on = _named(evidence.train_format, evidence)
    if why == "serving":
        served = _named(evidence.serving_format or "", evidence)
        return (
            f"{train} are written in {trained_on} but {evidence.serving_share:.0%} of the "
            f"{evidence.serving_examples:,} serving prompts in {served}: trained on "
            f"{_clip(evidence.train_sample)!r}, served {_clip(evidence.serving_sample)!r}"
        )
    marker = evidence.markers[0] if evidence.markers else ""
    return (
        f"{train} are written in {trained_on}, not in the tokenizer's own chat template "
        f"({evidence.tokenizer_format}, {marker!r}): a model served through apply_chat_template "
        f"sees markers it never trained on; trained on {_clip(evidence.train_sample)!r}"
    )


def _named(name: str, evidence: TemplateFormats) -> str:
    if name == TOKENIZER_TEMPLATE and evidence.tokenizer_format:
        return f"{name} ({evidence.tokenizer_format})"
    return name if name in (TOKENIZER_TEMPLATE, NO_MARKERS) else f"the {name} format"


def judge(evidence: TemplateFormats) -> list[Finding]:
    why = mismatch(evidence)
    if why is None:
        return []
    data: dict[str, Any] = {
        "tokenizer_template": evidence.tokenizer_format,
        "tokenizer_markers": evidence.markers,
        "train_format": evidence.train_format,
        "train_share": round(evidence.train_share, 4),
        "examples_checked": evidence.train_examples,
        "with_template": evidence.with_template,
        "train_sample": _clip(evidence.train_sample),
    }
    if evidence.serving_format is not None:
        data.update(
            serving_format=evidence.serving_format,
            serving_share=round(evidence.serving_share, 4),
            serving_checked=evidence.serving_examples,
            served_sample=_clip(evidence.serving_sample),
        )
    return [SPEC.finding(_data_message(evidence, why), evidence=data)]


def _clip(value: object) -> str:
    text = str(value or "")
    return text if len(text) <= SAMPLE_CHARS else text[: SAMPLE_CHARS - 3] + "..."


def message(evidence: Mapping[str, Any]) -> str:
    """The guard's wording: training text without the template, prompts served with it."""
    checked = int(evidence.get("examples_checked", 0))
    carrying = int(evidence.get("with_template", 0))
    return (
        f"{checked - carrying:,} of {checked:,} training examples do not carry the tokenizer's chat "
        f"template markers, but prompts are rendered with {evidence.get('served_with')}: trained on "
        f"{_clip(evidence.get('train_sample'))!r}, served {_clip(evidence.get('served_sample'))!r}"
    )


_guard_rule = observation_rule(SPEC, GUARD_OBSERVATION, message)


def guard_rule(record: RunRecord) -> list[Finding]:
    """The guard's observation, kept when most training examples lack the served template."""
    kept = []
    for found in _guard_rule(record):
        checked = int(found.evidence.get("examples_checked", 0))
        carrying = int(found.evidence.get("with_template", 0))
        if checked > 0 and carrying / checked < MAJORITY:
            kept.append(found)
    return kept


guard_rule.__name__, guard_rule.__doc__ = _guard_rule.__name__, _guard_rule.__doc__

RULES: tuple[Rule, ...] = (guard_rule,)
