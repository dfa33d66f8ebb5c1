"""trainmedic for Hugging Face: `Guard`, a TrainerCallback that guards `Trainer.train`.

    trainer = Trainer(..., callbacks=[trainmedic.hf.Guard()])

It starts the PyTorch guard on the model and optimizer the Trainer built, and
reports what the Trainer knows: epochs and steps requested, early stopping,
each finished epoch with its training loss, and evaluation losses as
`val_loss`. Under `trainmedic run` it is added to every Trainer automatically.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sized
from types import ModuleType
from typing import Any

from trainmedic import llm
from trainmedic.errors import install_hint
from trainmedic.events import Epoch, Event, GuardObservation, Metric, PhaseEnd, PhaseStart, TrainingPlan
from trainmedic.findings import Finding
from trainmedic.instrument import hooks
from trainmedic.logged import logged_step
from trainmedic.rules.tor import tor017_resume_state_lost as tor017
from trainmedic.rules.trn.trn009_eval_set_is_train import EVAL_OVERLAP_OBSERVATION

try:
    from transformers import TrainerCallback
except ImportError as exc:
    raise ImportError(f"trainmedic.hf needs transformers: {install_hint('transformers', 'hf')}") from exc

import trainmedic.torch as tm
from trainmedic.llm import preference as llm_preference
from trainmedic.llm import rl as llm_rl
from trainmedic.llm import sft as llm_sft
from trainmedic.llm import templates as llm_templates
from trainmedic.torch._safety import contained
from trainmedic.torch._trainer_resumes import check_start

# The fine-tuning watches, as under `trainmedic run` (whose boot hooks install the same): on
# every language model the torch guard meets, and what they learn outside the model: the rows
# `resize_token_embeddings` adds after this import (TOR014), the chat template renders that
# serve the model (DAT016), what TRL's truncation cuts (DAT017).
hooks.when_imported("transformers.modeling_utils", llm.install)
hooks.when_imported("transformers.tokenization_utils_base", llm_templates.install)
hooks.when_imported("trl.trainer.sft_trainer", llm_sft.install)
hooks.when_imported("trl.trainer.dpo_trainer", llm_preference.install)  # TRN014, DAT018/020 on DPO


def trainer_tokenizer(kwargs: Mapping[str, Any]) -> Any:
    """The tokenizer the Trainer was given, else the one its data collator pads with.

    `Trainer(model=..., data_collator=DataCollatorForLanguageModeling(tok))` without
    `processing_class` is common: the collator (inside the Trainer's column-removing wrapper)
    holds the tokenizer whose pad and EOS tokens the labels are made of."""
    given = kwargs.get("processing_class") or kwargs.get("tokenizer")
    if given is not None:
        return given
    collator = getattr(kwargs.get("train_dataloader"), "collate_fn", None)
    collator = getattr(collator, "data_collator", collator)  # transformers' RemoveColumnsCollator
    return getattr(collator, "tokenizer", None) or getattr(collator, "processing_class", None)


class Guard(TrainerCallback):
    """HF Trainer callback: the PyTorch guard plus epochs requested vs done (RUN004)."""

    def __init__(
        self, *, every: int | None = None, on_nonfinite: str = "warn", early_stopping: bool = False
    ) -> None:
        self.every = every
        self.on_nonfinite = on_nonfinite
        self.early_stopping = early_stopping
        self.guard: tm.Guard | None = None
        self._losses: list[float] = []
        self._epoch_start_step = 0
        self._eval_judged = False

    def _emit(self, event: Event) -> None:
        if self.guard is not None:
            self.guard.monitor.emit(event)

    def findings(self) -> list[Finding]:
        return self.guard.findings() if self.guard is not None else []

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.guard = tm.guard(
            kwargs.get("model"), kwargs.get("optimizer"), every=self.every, on_nonfinite=self.on_nonfinite
        )
        self.guard.monitor.framework_epochs = True
        llm.attach(kwargs.get("model"), self.guard.monitor, tokenizer=trainer_tokenizer(kwargs))
        resumed = contained(
            self.guard.monitor, "resume check", check_start, kwargs.get("model"), args, state, kwargs
        )
        if resumed:
            self.guard.monitor.observe(tor017.OBSERVATION, resumed)
        by_steps = args.max_steps is not None and args.max_steps > 0
        self._emit(
            TrainingPlan(
                framework="transformers",
                epochs=None if by_steps else math.ceil(args.num_train_epochs),
                max_steps=state.max_steps or None,
                batch_size=args.per_device_train_batch_size,
                early_stopping=self.early_stopping,
            )
        )

    def on_epoch_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._epoch_start_step = state.global_step
        epoch = int(state.epoch or 0)  # at an epoch's start HF's float epoch is the epochs done
        if self.guard is not None:
            self.guard.monitor.epoch = epoch  # numbers the guard's Step events
        self._emit(PhaseStart(phase="train", epoch=epoch, step=state.global_step))

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        if logs and isinstance(logs.get("loss"), (int, float)):
            self._losses.append(float(logs["loss"]))
        if self.guard is not None:  # TRL's DPO metrics (rewards/margins...): TRN014
            llm_preference.on_log(self.guard.monitor, state.global_step, logs)
        if logs and llm_rl.is_rl_log(logs):  # TRL's GRPO/RLOO metrics (TRN015-TRN017)
            self._emit(llm_rl.observation(args, state.global_step, state.epoch, logs))
        self._log_values(state, logs)

    def _log_values(self, state: Any, logs: Any) -> None:
        """Every value the Trainer logs (`loss`, `grad_norm`, `learning_rate`, TRL's extra metrics,
        evaluation metrics) as a point of its curve at the step it was logged at (`logged`).
        Not the summary `train()` logs at its end (`train_runtime`, the mean `train_loss` of the
        whole run: no point of a curve), and not `eval_loss`, which `on_evaluate` sends as
        `val_loss` (one curve per quantity)."""
        if not isinstance(logs, Mapping) or "train_runtime" in logs:
            return
        step = logged_step(
            "transformers", logs, step=state.global_step, epoch=self._epoch(state), skip=EVAL_LOSS
        )
        if step is not None:
            self._emit(step)

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        epoch = self._epoch(state)
        metrics: dict[str, float] = {}
        loss = self.guard.monitor.take_epoch_loss() if self.guard is not None else None
        if loss is None and self._losses:
            loss = self._losses[-1]
        if loss is not None:
            metrics["loss"] = loss
        self._losses = []
        self._emit(PhaseEnd(phase="train", epoch=epoch, step=state.global_step))
        self._emit(Epoch(epoch=epoch, steps=state.global_step - self._epoch_start_step, metrics=metrics))

    def on_evaluate(self, args: Any, state: Any, control: Any, metrics: Any = None, **kwargs: Any) -> None:
        value = (metrics or {}).get("eval_loss")
        if isinstance(value, (int, float)):
            epoch = max(0, math.ceil(state.epoch or 0) - 1)
            self._emit(Metric(name="val_loss", value=float(value), epoch=epoch))
        self._judge_eval_set(kwargs.get("train_dataloader"), kwargs.get("eval_dataloader"))

    def _judge_eval_set(self, train: Any, evaluation: Any) -> None:
        """At the first evaluation: the Trainer evaluates on its training dataset itself
        (`eval_dataset=train_dataset`), or on examples that are training examples by content
        (the data repeated or concatenated before its split, the same rows reloaded): the score,
        the best checkpoint and early stopping measure memorisation (TRN009; the rule decides).
        Whole examples are compared (their `input_ids`, else their text fields), at most
        `MAX_EVAL_ROWS` evaluation and `MAX_TRAIN_ROWS` training examples, evenly spaced."""
        dataset, eval_dataset = getattr(train, "dataset", None), getattr(evaluation, "dataset", None)
        if self._eval_judged or dataset is None or eval_dataset is None:
            return
        self._eval_judged = True
        data: dict[str, Any] = {"framework": "the HF Trainer", "eval_name": "eval_dataset"}
        if eval_dataset is dataset:
            rows = len(dataset) if isinstance(dataset, Sized) else 0
            data.update(same_object=True, shared_rows=rows, eval_rows=rows)
        else:
            eval_keys, eval_total = _example_keys(eval_dataset, MAX_EVAL_ROWS)
            train_keys, train_total = _example_keys(dataset, MAX_TRAIN_ROWS)
            known = set(train_keys)
            shared = sum(key in known for key in eval_keys)
            if not shared:
                return
            data.update(same_object=False, by_content=True, shared_rows=shared, eval_rows=len(eval_keys))
            data.update(
                eval_rows_total=eval_total, train_rows_compared=len(train_keys), train_rows_total=train_total
            )
        data["early_stopping"] = self.early_stopping
        self._emit(GuardObservation(check=EVAL_OVERLAP_OBSERVATION, data=data))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """`train()` returns: send the last steps' window now. Under `trainmedic run` the
        process's monitor outlives this Trainer, and at exit its optimizer is often gone (a
        Trainer made in a function), which would leave the curve without its last steps."""
        if self.guard is not None:
            self.guard.monitor.settle()
            self.guard.stop()

    @staticmethod
    def _epoch(state: Any) -> int:
        """0-based index of the epoch in progress (HF's `state.epoch` is a float that ends at N)."""
        return max(0, math.ceil(state.epoch or 0) - 1) if state.epoch else 0


#: The Trainer's evaluation loss, sent as `val_loss` by `on_evaluate` rather than as a logged value.
EVAL_LOSS = frozenset({"eval_loss"})

#: The examples compared for TRN009's content check, per set: its cost, once, at the first evaluation.
MAX_EVAL_ROWS = 2_000
MAX_TRAIN_ROWS = 10_000


def _example_keys(dataset: Any, limit: int) -> tuple[list[int], int]:
    """Hashes of up to `limit` evenly spaced examples of `dataset`, and its length."""
    total = len(dataset) if isinstance(dataset, Sized) and hasattr(dataset, "__getitem__") else 0
    if total == 0:
        return [], 0
    indices = list(range(0, total, max(1, -(-total // limit))))
    columns = getattr(dataset, "column_names", None)
    if columns is not None:  # a `datasets.Dataset`: one columnar read, of the token ids alone if there
        table = dataset.select_columns(["input_ids"]) if "input_ids" in columns else dataset
        batch = table[indices]
        rows: list[Any] = [
            dict(zip(batch, values, strict=True)) for values in zip(*batch.values(), strict=True)
        ]
    else:
        rows = [dataset[i] for i in indices]
    keys = [_example_key(row) for row in rows]
    return [k for k in keys if k is not None], total


def _example_key(row: Any) -> int | None:
    """A whole example's hash: its token ids, else its text fields (prompt and completion,
    messages, text...); None for what is neither."""
    if not isinstance(row, Mapping):
        return None
    ids = row.get("input_ids")
    if ids is not None:
        return hash(tuple(ids.tolist() if hasattr(ids, "tolist") else ids))
    fields = tuple((k, repr(v)) for k, v in sorted(row.items()) if isinstance(v, (str, list)))
    return hash(fields) if fields else None


def install(module: ModuleType) -> None:
    """Add a `Guard` to every Trainer of `transformers.trainer` (the post-import hook's call).

    A Trainer given `EarlyStoppingCallback` gets a Guard that knows it stops early; one that
    already has a Guard keeps its own.
    """
    trainer_cls = getattr(module, "Trainer", None)
    if trainer_cls is not None:
        hooks.run_after(trainer_cls, "__init__", _add_guard)


def _add_guard(trainer: Any) -> None:
    callbacks = trainer.callback_handler.callbacks
    if not any(isinstance(c, Guard) for c in callbacks):
        stopping = any(type(c).__name__ == "EarlyStoppingCallback" for c in callbacks)
        trainer.add_callback(Guard(early_stopping=stopping))


__all__ = ["Guard", "install"]
