"""TRL's `SFTTrainer`: what truncation at `max_length` cuts from the training set (DAT017).

TRL prepares the data set when the trainer is built (`SFTTrainer._prepare_dataset`): it
tokenizes, builds the labels, truncates every example to `args.max_length` (keeping its start,
or its end with `truncation_mode="keep_end"`) and then drops the examples left with no
supervised label, with only a progress bar to tell it. `install` (the post-import hook on
`trl.trainer.sft_trainer` under `trainmedic run`) wraps that method; for the training set
it counts, against the data set given:

- for data sets in TRL's text formats (`messages`, `prompt`/`completion`, `text`): up to
  `MAX_RENDERED` examples, evenly spaced, rendered and tokenized as TRL does (the same
  measure as `trainmedic check data --max-length`, `data.finetune.lengths`): `dropped`, the
  examples whose prompt alone fills `max_length` (no completion left: TRL drops them under a
  completion-only loss, and keeps them, prompt only, under a loss on the whole text), and
  `cut`, those longer than `max_length` whose completion loses its end; counts of a sample
  are scaled to the data set (`sampled` says how many were rendered);
- otherwise (token ids given): `dropped`, the examples given minus those kept (the only
  filter of the preparation is TRL's drop of fully masked examples), and `cut`, kept examples
  at exactly `max_length` without an EOS among their last two tokens (with `keep_end`: whose
  first token is supervised).

and observes `completion_truncated` on the running guard's monitor, at once: TRL crashes
with `num_samples=0` when it drops every example, before training starts. With no guard
running yet (`trainmedic.hf.Guard` outside `trainmedic run`: its guard starts with
`train()`), the counts wait for the first guard that attaches to a model (`deliver`).

Not measured: packing (TRL packs into `max_length` chunks instead of truncating), streamed
(`IterableDataset`) data sets (no length), `skip_prepare_dataset=True` (TRL truncates
nothing), evaluation sets.

Cost: once per trainer, after TRL's own preparation: one tokenization of at most
`MAX_RENDERED` examples (about 0.5 s for 2,000 chat examples on one core), or the lengths of
the `input_ids` column and two tokens of the examples at `max_length`, read as Arrow arrays.
Nothing per step.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sized
from types import ModuleType
from typing import Any

from trainmedic.rules.dat import dat017_completion_truncated as dat017

OBSERVATION = dat017.GUARD_OBSERVATION
IGNORE = -100  # the label transformers' losses ignore

#: Examples rendered to count what truncation cuts (the rest is estimated from them).
MAX_RENDERED = 2_000

_preparing = 0  # SFTTrainer data set preparations in progress (their chat renders are training)
_waiting: list[dict[str, Any]] = []  # counts made before any guard ran (`deliver`)


def preparing() -> bool:
    """An `SFTTrainer` is preparing a data set now: its `apply_chat_template` calls render
    training examples, whatever their arguments."""
    return _preparing > 0


def install(module: ModuleType) -> None:
    """Wrap `SFTTrainer._prepare_dataset` of `trl.trainer.sft_trainer` (once)."""
    trainer_cls = getattr(module, "SFTTrainer", None)
    original = getattr(trainer_cls, "_prepare_dataset", None)
    if trainer_cls is None or original is None or getattr(original, "_trainmedic", False):
        return
    trainer_cls._prepare_dataset = _wrap(original)


def _wrap(original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def _prepare_dataset(self: Any, *args: Any, **kwargs: Any) -> Any:
        global _preparing
        _preparing += 1
        try:
            prepared = original(self, *args, **kwargs)
        finally:
            _preparing -= 1
        try:
            bound = signature.bind(self, *args, **kwargs).arguments
            if bound.get("dataset_name") == "train":
                _observe(type(self).__name__, bound, prepared)
        except Exception as exc:  # the measurement costs itself, never the user's trainer
            _failed(exc)
        return prepared

    _prepare_dataset._trainmedic = True  # type: ignore[attr-defined]
    return _prepare_dataset


def _observe(trainer: str, bound: dict[str, Any], prepared: Any) -> None:
    from trainmedic.torch import _patches

    args = bound.get("args")
    tokenizer = getattr(bound.get("processing_class"), "tokenizer", bound.get("processing_class"))
    max_length = getattr(args, "max_length", None)
    keep_end = getattr(args, "truncation_mode", "keep_start") == "keep_end"
    counts = truncation_counts(
        bound.get("dataset"),
        prepared,
        max_length=max_length,
        keep_end=keep_end,
        packing=bool(bound.get("packing")),
        eos_id=getattr(tokenizer, "eos_token_id", None),
    )
    # a formatting function rewrites the rows before TRL renders them: only TRL's output is read
    if counts is not None and not keep_end and tokenizer is not None and bound.get("formatting_func") is None:
        counts.update(rendered_counts(bound.get("dataset"), tokenizer, counts["max_length"]) or {})
    if counts is None:
        return
    monitor = _patches.active()
    if monitor is None:
        _waiting[:] = [{"trainer": trainer, **counts}]  # the latest trainer's data set
    else:
        monitor.observe(OBSERVATION, {"trainer": trainer, **counts})


def deliver(monitor: Any) -> None:
    """Observe the counts made before a guard ran on `monitor`, the one now attaching."""
    while _waiting:
        monitor.observe(OBSERVATION, _waiting.pop())


def truncation_counts(
    given: Any, prepared: Any, *, max_length: int | None, keep_end: bool, packing: bool, eos_id: int | None
) -> dict[str, int] | None:
    """`max_length`, `examples` given, `dropped` and `cut` (module docstring); None when TRL
    truncated nothing or the data sets have no length."""
    if packing or max_length is None or max_length < 2:
        return None
    if not (isinstance(given, Sized) and isinstance(prepared, Sized) and hasattr(prepared, "with_format")):
        return None
    import pyarrow.compute as pc

    table = prepared.with_format("arrow")  # TRL's filter and shuffle leave an index mapping: applied here
    ids = table["input_ids"]
    at_max = pc.equal(pc.list_value_length(ids), max_length)
    full = pc.filter(ids, at_max)
    if keep_end:
        labels = pc.filter(table["labels"], at_max)
        cut_mask = pc.not_equal(pc.list_element(labels, 0), IGNORE)
    elif eos_id is None:
        cut_mask = pc.equal(pc.list_value_length(full), max_length)
    else:
        last = pc.not_equal(pc.list_element(full, max_length - 1), eos_id)
        before_last = pc.not_equal(pc.list_element(full, max_length - 2), eos_id)
        cut_mask = pc.and_(last, before_last)
    return {
        "max_length": int(max_length),
        "examples": len(given),
        "cut": int(pc.sum(cut_mask).as_py() or 0),
        "dropped": len(given) - len(prepared),
    }


def rendered_counts(given: Any, tokenizer: Any, max_length: int) -> dict[str, int] | None:
    """`dropped`, `cut` and `sampled` from examples rendered as TRL renders them (module
    docstring); None for a data set that is not in one of TRL's text formats."""
    from trainmedic.data.finetune import lengths, reader

    columns: list[str] = list(getattr(given, "column_names", None) or [])
    fmt = reader.format_of(set(columns))
    if fmt is None or "input_ids" in columns or not hasattr(given, "select") or not len(given):
        return None
    total = len(given)
    indices = (
        list(range(total))
        if total <= MAX_RENDERED
        else [int(i * total / MAX_RENDERED) for i in range(MAX_RENDERED)]
    )
    picked = given.select(indices)
    split = reader.set_of_rows(
        "train", "train_dataset", [(i + 1, dict(row)) for i, row in zip(indices, picked, strict=True)], fmt
    )
    measured = lengths.measure(split, tokenizer)
    if not measured:
        return None
    dropped = sum(x.prompt >= max_length for x in measured)
    cut = sum(x.prompt < max_length < x.total for x in measured)
    scale = total / len(measured)
    return {"dropped": round(dropped * scale), "cut": round(cut * scale), "sampled": len(measured)}


def _failed(exc: Exception) -> None:
    from trainmedic.torch import _patches
    from trainmedic.torch._safety import check_failed

    monitor = _patches.active()
    if monitor is not None:
        check_failed(monitor, "llm.sft", exc)
