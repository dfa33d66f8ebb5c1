"""DAT016's measure: the format the training examples and the served prompts are written in.

Rendered text (a `text` row, a plain prompt + completion, a served prompt string) is named by
its markers: the tokenizer's chat template when it holds the template's role marker, else a
known other format (Alpaca, Llama-2 `[INST]`, ChatML, ...), else none. Conversational rows are
rendered by TRL (or the server) with the tokenizer's template, so they are in it by
construction; without `--tokenizer` that template is unknown. Each side's majority is sent to
DAT016's `judge`. Cost: a regular-expression scan of up to `SAMPLE` examples a side.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from trainmedic.data.finetune.reader import Example, FineTuneSet
from trainmedic.data.finetune.tokenizer import ChatTemplate, chat_template, known_format, render
from trainmedic.findings import Finding
from trainmedic.rules.dat import dat016_chat_template_mismatch as dat016

SAMPLE = 2000  # examples named a side, evenly spaced: a format is a property of the whole file


def template_findings(sets: list[FineTuneSet], tokenizer: Any | None) -> list[Finding]:
    """DAT016 for the training split against the tokenizer's template and the served prompts."""
    template = chat_template(tokenizer) if tokenizer is not None else None
    train = sets[0]
    serving = next((s for s in sets if s.name == "serving"), None)
    t_format, t_share, t_with, t_sample = _side(train, tokenizer, template)
    evidence = dat016.TemplateFormats(
        tokenizer_format=template.name if template is not None else None,
        markers=[template.marker] if template is not None else [],
        train_format=t_format,
        train_share=t_share,
        train_examples=min(len(train), SAMPLE),
        with_template=t_with,
        train_sample=t_sample,
        train_rendered=not any(e.conversational for e in train.examples[:1]),
    )
    if serving is not None:
        s_format, s_share, _, s_sample = _side(serving, tokenizer, template, serving=True)
        evidence = replace(
            evidence,
            serving_format=s_format,
            serving_share=s_share,
            serving_examples=min(len(serving), SAMPLE),
            serving_sample=s_sample,
        )
    return dat016.judge(evidence)


def _side(
    split: FineTuneSet, tokenizer: Any | None, template: ChatTemplate | None, *, serving: bool = False
) -> tuple[str, float, int, str]:
    """The majority format of a side, its share, the examples in the tokenizer's template and a
    sample in the majority format (rendered as trained on or served)."""
    picked = _spread(split.examples)
    names = [_format(e, template) for e in picked]
    counts = Counter(names)
    majority, count = counts.most_common(1)[0]
    sample = next(e for e, n in zip(picked, names, strict=True) if n == majority)
    return (
        majority,
        count / len(picked),
        counts[dat016.TOKENIZER_TEMPLATE],
        _sample(sample, tokenizer, template, serving),
    )


def _format(example: Example, template: ChatTemplate | None) -> str:
    if example.conversational:
        return dat016.TOKENIZER_TEMPLATE if template is not None else dat016.UNKNOWN
    text = _plain_text(example)
    if template is not None and template.carried_by(text):
        return dat016.TOKENIZER_TEMPLATE
    return known_format(text) or dat016.NO_MARKERS


def _plain_text(example: Example) -> str:
    return "".join(content for _, content in example.prompt + example.completion)


def _sample(example: Example, tokenizer: Any | None, template: ChatTemplate | None, serving: bool) -> str:
    text = _plain_text(example)
    if example.conversational and tokenizer is not None and template is not None:
        messages = example.messages(example.prompt if serving else None)
        try:
            text = render(tokenizer, messages, generation_prompt=serving)
        except Exception:  # the template rejects this conversation: show its contents instead
            text = str(messages)
    elif example.conversational:
        text = str(example.messages())
    return text[: dat016.SAMPLE_CHARS]


def _spread(examples: list[Example]) -> list[Example]:
    if len(examples) <= SAMPLE:
        return examples
    step = len(examples) / SAMPLE
    return [examples[int(i * step)] for i in range(SAMPLE)]
