"""The format of the training text against the chat template that serves the model (DAT016).

A model fine-tuned on text its tokenizer's chat template does not produce (an Alpaca
`### Instruction:` format, a hand-written `User: ... Assistant:` one) and then prompted with
`tokenizer.apply_chat_template(..., add_generation_prompt=True)` meets at inference a format
it never learned. Both sides are measured:

- serving: `PreTrainedTokenizerBase.apply_chat_template` is wrapped (`install`: the
  post-import hook on `transformers.tokenization_utils_base` under `trainmedic run`; `attach`
  installs it too, for `trainmedic.hf.Guard`). A render with `add_generation_prompt=True`,
  or any render once training has started, serves, except the renders of TRL's data set
  preparation (`sft.preparing()`: they make training examples). The first serving render of
  each tokenizer is kept (tokenizer, `chat_template` argument, the rendered text).
- training: `attach` registers a forward pre-hook (with kwargs) on the model that keeps a
  reference to the `input_ids` of its first `MAX_BATCHES` forwards with grad enabled; the
  checked steps (`on_check`) read them, `MAX_ROWS` rows at most.

The template's marker is what a served prompt and a rendered conversation share right after
the user's message, whitespace ignored: `<|im_end|><|im_start|>assistant` for ChatML,
`<|eot_id|><|start_header_id|>assistant<|end_header_id|>` for Llama 3, `[/INST]` for Llama 2
and Mistral. It is found by rendering a probe conversation with the serving tokenizer and
template; each sampled row is decoded with that tokenizer and counted when it holds the
marker, or the template's opening of a user turn (`<|im_start|>user`, `[INST]`): a row cut
at `max_length` before its first turn ended was rendered with the template all the same.
`chat_template_mismatch` is observed once both sides are there: at the checked step
that ends the sampling, at a serving render after it (or after the guard closed), or at the
end. A serving tokenizer of another vocabulary (a judge model's) is not compared.

Not observable: a model trained with the template and served with a prompt built by hand
(string formatting calls nothing), and renders by a processor (`ProcessorMixin`) or by
`mistral_common`'s tokenizer, which do not go through this method.

Cost: per `apply_chat_template` call, a few attribute reads (TRL calls it once per example
while it prepares a data set). Per forward of the root model, until `MAX_BATCHES` are kept: a
reference appended; the hook is removed at the next checked step. On checked steps: reading
the kept `input_ids` (at most `MAX_ROWS` rows). Once: two renders of the probe and the
decoding of the sampled rows.
"""

from __future__ import annotations

import functools
import sys
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from trainmedic.llm import sft
from trainmedic.rules.dat import dat016_chat_template_mismatch as dat016

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike

OBSERVATION = dat016.GUARD_OBSERVATION
MAX_BATCHES = 8  # training forwards whose input_ids are kept: a few batches show a data set's format
MAX_ROWS = 32  # rows decoded: enough to see a format that is uniform across a data set
MAX_RENDERS = 4  # serving tokenizers remembered (the model's, a reloaded copy, a judge's...)
SAMPLE_CHARS = dat016.SAMPLE_CHARS
# A marker shorter than this ("A:") would be found in any text: no comparison is made.
MIN_MARKER = 3
# The end of the opening compared: enough for `<|start_header_id|>user<|end_header_id|>`, not
# the whole of a default system turn before it (a cut row may hold only its end).
OPENING_CHARS = 48
# A tokenizer serves this model when its size is the embedding matrix's, give or take the
# padding of the vocabulary to a multiple (Qwen2.5: 151,665 tokens, 151,936 rows).
VOCAB_SLACK = 1024
_QUESTION, _ANSWER = "trainmedic probe question", "trainmedic probe answer"


@dataclass(frozen=True, slots=True)
class Render:
    """The first serving render of a tokenizer."""

    tokenizer: weakref.ref[Any]
    chat_template: str | None
    sample: str


_renders: list[Render] = []
_watches: list[weakref.ref[TemplateWatch]] = []
_probing = False  # the probe's own renders serve nothing


def install(module: ModuleType) -> None:
    """Wrap `PreTrainedTokenizerBase.apply_chat_template` (once)."""
    base = getattr(module, "PreTrainedTokenizerBase", None)
    method = getattr(base, "apply_chat_template", None)
    if base is None or method is None or getattr(method, "_trainmedic", False):
        return
    base.apply_chat_template = _wrap(method)


def _wrap(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def apply_chat_template(self: Any, conversation: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, conversation, *args, **kwargs)
        if not _probing and not sft.preparing() and (_generation(args, kwargs) or _training_started()):
            try:
                _note(self, conversation, args, kwargs, result)
            except Exception as exc:  # costs this measurement, never the user's call
                _failed(exc)
        return result

    apply_chat_template._trainmedic = True  # type: ignore[attr-defined]
    return apply_chat_template


def _generation(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    # (conversation, tools, documents, chat_template, add_generation_prompt, ...)
    return bool(kwargs.get("add_generation_prompt", args[3] if len(args) > 3 else False))


def _training_started() -> bool:
    return any((watch := ref()) is not None and watch.monitor.step > 0 for ref in _watches)


def _note(
    tokenizer: Any, conversation: Any, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any
) -> None:
    if any(render.tokenizer() is tokenizer for render in _renders):
        return
    _renders[:] = [render for render in _renders if render.tokenizer() is not None]
    if len(_renders) >= MAX_RENDERS:
        return
    template = kwargs.get("chat_template", args[2] if len(args) > 2 else None)
    if isinstance(result, list) and result and isinstance(result[0], str):
        result = result[0]  # a batch of conversations rendered as text
    if not isinstance(result, str):
        first = conversation[0] if conversation and isinstance(conversation[0], list) else conversation
        result = _render(tokenizer, first, template, generation=_generation(args, kwargs))
    _renders.append(Render(weakref.ref(tokenizer), template, str(result)[:SAMPLE_CHARS]))
    for ref in list(_watches):
        watch = ref()
        if watch is not None:
            watch.on_serving()


def _render(tokenizer: Any, conversation: Any, template: str | None, *, generation: bool) -> Any:
    """The text `tokenizer`'s template makes of `conversation`, without counting as a serving render."""
    global _probing
    _probing = True
    try:
        return tokenizer.apply_chat_template(
            conversation, chat_template=template, add_generation_prompt=generation, tokenize=False
        )
    finally:
        _probing = False


def squash(text: str) -> str:
    """`text` without whitespace: templates and decoders differ in spaces and newlines only."""
    return "".join(text.split())


def template_marker(tokenizer: Any, template: str | None) -> str:
    """What a served prompt and a rendered conversation share after the user's message
    (whitespace removed): the template's turn boundary; "" when the probe cannot say."""
    return template_markers(tokenizer, template)[1]


def template_markers(tokenizer: Any, template: str | None) -> tuple[str, str]:
    """The template's opening of the user's turn (the end of what a served prompt puts before
    the user's message, at most `OPENING_CHARS`) and its turn boundary (`template_marker`),
    whitespace removed; "" for what the probe cannot say. A training row cut at `max_length`
    before its first turn ended holds the opening alone: it was rendered with the template."""
    question = [{"role": "user", "content": _QUESTION}]
    try:
        served = _render(tokenizer, question, template, generation=True)
        trained = _render(
            tokenizer, [*question, {"role": "assistant", "content": _ANSWER}], template, generation=False
        )
    except Exception:  # a template that needs more (a system turn, tools): no marker
        return "", ""
    if not (isinstance(served, str) and isinstance(trained, str)):
        return "", ""
    asked, said = served.find(_QUESTION), trained.find(_QUESTION)
    answered = trained.find(_ANSWER, said + 1)
    if asked < 0 or said < 0 or answered < 0:
        return "", ""
    after = squash(served[asked + len(_QUESTION) :])
    between = squash(trained[said + len(_QUESTION) : answered])
    pairs = zip(after, between, strict=False)
    same = next((i for i, (a, b) in enumerate(pairs) if a != b), min(len(after), len(between)))
    return squash(served[:asked])[-OPENING_CHARS:], after[:same]


class TemplateWatch:
    """Samples the training rows of one model for one monitor; compares them with the
    serving renders (a `Watcher` of `monitor.watchers`)."""

    def __init__(self, model: Any, monitor: MonitorLike, tokenizer: Any) -> None:
        import torch

        self.monitor = monitor
        self._model = weakref.ref(model)
        self._tokenizer = getattr(tokenizer, "tokenizer", tokenizer)  # a processor's tokenizer
        self._grad_enabled = torch.is_grad_enabled
        self._tensor = torch.Tensor
        self._kept: list[Any] = []  # input_ids of training forwards, not read yet
        self._batches = 0
        self.rows: list[list[int]] = []
        self.closed = False
        self._ruled_out: set[int] = set()  # renders that cannot be compared (by id): not tried again
        self._handle: Any = model.register_forward_pre_hook(self._keep, with_kwargs=True)

    def _keep(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Each forward until `MAX_BATCHES` are kept: O(1), no tensor op."""
        try:
            if self._batches >= MAX_BATCHES or not self._grad_enabled():
                return
            ids = kwargs.get("input_ids", args[0] if args else None)
            if isinstance(ids, self._tensor) and ids.dim() == 2 and not ids.is_floating_point():
                self._kept.append(ids)
                self._batches += 1
        except Exception as exc:  # never the user's forward
            self._batches = MAX_BATCHES
            _failed(exc, self.monitor)

    @property
    def done(self) -> bool:
        return self._batches >= MAX_BATCHES or len(self.rows) >= MAX_ROWS

    def _read(self) -> None:
        for ids in self._kept:
            room = MAX_ROWS - len(self.rows)
            if room <= 0:
                break
            self.rows.extend(ids[:room].tolist())
        self._kept.clear()
        if self.done:
            self._unhook()

    def _unhook(self) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def on_check(self, step: int) -> None:
        self._read()
        if self.done:
            self._judge(step)

    def on_serving(self) -> None:
        """A serving render was just noted: judge now if the sampling is over."""
        if self.done or self.closed:
            self._read()
            self._judge(self.monitor.step or None)

    def on_close(self) -> None:
        self._read()
        self._unhook()
        self.closed = True
        self._judge(None)

    def _judge(self, step: int | None) -> None:
        if OBSERVATION in self.monitor.reported or not self.rows:
            return
        for render in _renders:
            tokenizer = render.tokenizer()
            if tokenizer is None or id(render) in self._ruled_out:
                continue
            opening, marker = template_markers(tokenizer, render.chat_template)
            if len(marker) < MIN_MARKER or not self._serves_this_model(tokenizer):
                self._ruled_out.add(id(render))
                continue
            texts = [_decode(tokenizer, row) for row in self.rows]
            openings = [opening] if len(opening) >= MIN_MARKER else []
            data = {
                "examples_checked": len(texts),
                "with_template": sum(any(m in squash(text) for m in [marker, *openings]) for text in texts),
                "served_with": "apply_chat_template",
                "train_sample": texts[0][:SAMPLE_CHARS],
                "served_sample": render.sample,
            }
            self.monitor.observe(OBSERVATION, data, step=step)
            return

    def _serves_this_model(self, tokenizer: Any) -> bool:
        """`tokenizer` has the vocabulary of the training tokenizer (or fits the model's
        embeddings when the training tokenizer is unknown): decoding the rows with it is right."""
        known = self._tokenizer
        if known is not None:
            return known is tokenizer or (
                len(known) == len(tokenizer) and known.get_vocab() == tokenizer.get_vocab()
            )
        size = len(tokenizer)
        if any(max(row, default=0) >= size for row in self.rows):
            return False
        model = self._model()
        embeddings = model.get_input_embeddings() if model is not None else None
        rows = getattr(embeddings, "num_embeddings", None)
        return rows is None or abs(rows - size) <= VOCAB_SLACK


def _decode(tokenizer: Any, row: list[int]) -> str:
    """A row as text, its padding (left or right) left out."""
    pad = tokenizer.pad_token_id
    start, end = 0, len(row)
    while pad is not None and start < end and row[start] == pad:
        start += 1
    while pad is not None and end > start and row[end - 1] == pad:
        end -= 1
    return str(tokenizer.decode(row[start:end], skip_special_tokens=False))


def attach(model: Any, monitor: MonitorLike, *, tokenizer: Any = None) -> None:
    """Sample `model`'s training rows for `monitor`, and watch the serving renders."""
    module = sys.modules.get("transformers.tokenization_utils_base")
    if module is not None:  # outside `run` (trainmedic.hf.Guard): the wrapper starts here
        install(module)
    watch = TemplateWatch(model, monitor, tokenizer)
    monitor.watchers.append(watch)
    _watches[:] = [ref for ref in _watches if ref() is not None]
    _watches.append(weakref.ref(watch))


def _failed(exc: Exception, monitor: Any = None) -> None:
    """Said once (stderr and RUN011) through the guard; without torch there is no guard to tell."""
    if "torch" not in sys.modules:
        return
    from trainmedic.torch import _patches
    from trainmedic.torch._safety import check_failed

    monitor = monitor if monitor is not None else _patches.active()
    if monitor is not None:
        check_failed(monitor, "llm.templates", exc)
