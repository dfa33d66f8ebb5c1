"""The labels a language model is trained on: supervised tokens, EOS, and the shift.

`attach` registers one forward pre-hook (with kwargs) on the model the guard met. A forward
in train mode with grad enabled that carries `labels` and `input_ids` tensors of the same
2-d shape is measured; others (generation, evaluation, a loss computed outside the model)
pass untouched. A causal LM shifts its labels itself (transformers' `ForCausalLMLoss`:
`labels[:, j]` is the target of position `j - 1`, so `labels[:, 0]` never counts), so the
counts are taken on `labels[:, 1:]` (on `shift_labels` when the caller passes them shifted):

- per row, the supervised tokens (`labels != -100`): rows and batches with none (TOR010);
- the supervised tokens that are an EOS id (the model's config, its generation config and
  the tokenizer, any of them), the EOS ids in the attended inputs whose label is -100, and
  the attended, non-padding positions whose label is -100: data shaped as fine-tuning in
  which EOS is never supervised (TOR011);
- at supervised positions, `labels[:, i] == input_ids[:, i + 1]` against
  `labels[:, i] == input_ids[:, i]`: labels already shifted by one, fed to a model that
  shifts them again (TOR013), judged only for models whose loss is transformers' causal one.

Cost: per measured forward, the supervised-token counts are four ops on the labels (a
compare, a row sum, two reductions: about 60 us on the CPU for 8 x 2048 labels), stacked
into one small vector kept by reference: no host read. Until their findings are settled
(an EOS supervised; labels seen to equal the inputs over 2 batches) the EOS and shift counts
add about ten element-wise ops (0.2 ms for 8 x 128 on the CPU, 0.9 ms for 8 x 2048). On
each checked step (`on_check`) and at the end the kept vectors are stacked and read once,
and the findings' files judge the totals. One Python call per forward of the root model;
nothing on its submodules; a forward traced by `torch.compile` is not measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from trainmedic.rules.tor import tor010_no_supervised_tokens as tor010
from trainmedic.rules.tor import tor011_eos_never_supervised as tor011
from trainmedic.rules.tor import tor013_labels_double_shifted as tor013
from trainmedic.torch._safety import contained

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike

IGNORE = -100  # the label transformers' losses ignore (`ignore_index`)
_FOLD_AT = 256  # kept batch vectors beyond this are summed on the device (no read) to bound memory
# The order of one batch's counts in its vector, and the names of the totals.
FIELDS = (
    "rows_unsupervised",
    "batches_unsupervised",
    "supervised",
    "eos_supervised",
    "eos_masked",
    "masked_attended",
    "shift_compared",
    "shift_agree",
    "same_agree",
)
# The forward's tensors that say which labels are text: used when they have the labels' shape.
CONTEXT = ("attention_mask", "position_ids", "shift_labels")
# The classes whose loss is transformers' `ForCausalLMLoss` when `loss_type` says nothing.
_CAUSAL_SUFFIXES = ("ForCausalLM", "LMHeadModel")


@dataclass(slots=True)
class LabelTotals:
    """The counts over every measured batch, read on checked steps."""

    batches: int = 0
    rows: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FIELDS, 0))
    first_step: int | None = None
    last_step: int | None = None

    def evidence(self) -> dict[str, Any]:
        steps = {"first_step": self.first_step, "last_step": self.last_step}
        return {"batches": self.batches, "rows": self.rows, **self.counts, **steps}


def attach(model: Any, monitor: MonitorLike, *, tokenizer: Any = None) -> None:
    """Measure the labels of `model`'s training forwards for `monitor`."""
    watch = LabelWatch(model, monitor, tokenizer)
    watch.handle = model.register_forward_pre_hook(watch.pre_forward, with_kwargs=True)
    monitor.watchers.append(watch)


def same_shape(value: Any, labels: torch.Tensor) -> torch.Tensor | None:
    return value if isinstance(value, torch.Tensor) and value.shape == labels.shape else None


def base_model(model: Any) -> Any:
    """The transformers model inside a PEFT wrapper (the model itself otherwise)."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def ids_of(value: Any) -> set[int]:
    """Token ids from a config attribute: an int, a list of ints, or None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return {value}
    if isinstance(value, list | tuple):
        return {v for v in value if isinstance(v, int) and not isinstance(v, bool)}
    return set()


def eos_ids(model: Any, tokenizer: Any) -> set[int]:
    """Every id the model, its generation config or the tokenizer call end-of-sequence."""
    found = ids_of(getattr(getattr(model, "config", None), "eos_token_id", None))
    found |= ids_of(getattr(getattr(model, "generation_config", None), "eos_token_id", None))
    found |= ids_of(getattr(tokenizer, "eos_token_id", None))
    return found


def pad_id(model: Any, tokenizer: Any) -> int | None:
    """The padding id: the tokenizer's, else the model config's."""
    config = getattr(model, "config", None)
    for value in (getattr(tokenizer, "pad_token_id", None), getattr(config, "pad_token_id", None)):
        ids = ids_of(value)
        if ids:
            return min(ids)
    return None


def shifts_labels_inside(model: Any) -> bool:
    """Whether the model's loss shifts the labels itself: transformers' causal LM loss.

    `loss_type == "ForCausalLM"` (set from the class name), or a causal LM class whose loss
    type is unset (the default loss is the causal one). A loss function of the user's own
    (`model.loss_function = ...`) may not shift: then nothing is judged.
    """
    if "_loss_function" in vars(model):
        return False
    loss_type = getattr(model, "loss_type", None)
    if loss_type is not None:
        return bool(loss_type == "ForCausalLM")
    return type(model).__name__.endswith(_CAUSAL_SUFFIXES)


def token_names(tokenizer: Any, ids: set[int]) -> list[str]:
    convert = getattr(tokenizer, "convert_ids_to_tokens", None)
    if not callable(convert):
        return []
    try:
        return [str(convert(i)) for i in sorted(ids)]
    except Exception:  # a tokenizer that cannot name an id: the ids alone are the evidence
        return []


@dataclass(frozen=True, slots=True)
class Counting:
    """What a batch is measured for: the EOS ids (None once TOR011 is settled), the padding id
    that is not EOS, whether the shift is still measured, and a kept zero for what is not."""

    eos: torch.Tensor | None
    pad: int | None
    shift: bool
    zero: torch.Tensor


def measure(
    labels: torch.Tensor,
    input_ids: torch.Tensor,
    context: dict[str, torch.Tensor | None],
    counting: Counting,
) -> torch.Tensor:
    """One batch's counts (FIELDS), a vector on the labels' device: no host read.

    Position j of `targets` is the label of input j + 1 (`labels[:, 1:]`, or the caller's
    `shift_labels[:, :-1]`), the input it is compared with `input_ids[:, 1:]`. `context`
    holds the forward's `attention_mask`, `position_ids` and `shift_labels` (each None when
    absent or of another shape). Four ops count the supervised tokens; the EOS and shift
    counts stop once their finding is settled.
    """
    shifted, attention, positions = (context[k] for k in ("shift_labels", "attention_mask", "position_ids"))
    targets = shifted[:, :-1] if shifted is not None else labels[:, 1:]
    supervised = targets != IGNORE
    per_row = supervised.sum(1)
    total = per_row.sum()
    zero = counting.zero
    counts = [(per_row == 0).sum(), (total == 0).long(), total]
    if counting.eos is not None:
        inputs = input_ids[:, 1:]
        inside = ~supervised  # masked positions that are text: attended, not padding
        if attention is not None:
            inside &= attention[:, 1:].bool()
        if counting.pad is not None:
            inside &= inputs != counting.pad
        if positions is not None:  # examples packed in a row: each one's first token is no target
            inside &= positions[:, 1:] != 0
        eos = counting.eos
        counts += [(supervised & torch.isin(targets, eos)).sum(), (inside & torch.isin(inputs, eos)).sum()]
        counts.append(inside.sum())
    else:
        counts += [zero, zero, zero]
    if counting.shift and shifted is None:  # the user's labels against the inputs, before the model's shift
        raw = labels[:, :-1] != IGNORE
        counts += [raw.sum(), (raw & (labels[:, :-1] == input_ids[:, 1:])).sum()]
        counts.append((raw & (labels[:, :-1] == input_ids[:, :-1])).sum())
    else:
        counts += [zero, zero, zero]
    return torch.stack(counts)


class LabelWatch:
    """Measures each training forward's labels; reads and judges them on checked steps."""

    def __init__(self, model: Any, monitor: MonitorLike, tokenizer: Any) -> None:
        self.monitor = monitor
        inner = base_model(model)
        self.eos = eos_ids(inner, tokenizer)
        self.eos_names = token_names(tokenizer, self.eos)
        pad = pad_id(inner, tokenizer)
        # None: neither the tokenizer nor the model's config names a pad token (no claim made)
        self.pad_is_eos: bool | None = None if pad is None else pad in self.eos
        self.pad = None if self.pad_is_eos else pad  # padding that is EOS is what TOR011 looks for
        self.shifts_inside = shifts_labels_inside(inner)
        self.model_class = type(inner).__name__
        self._countings: dict[torch.device, Counting] = {}
        self.pending: list[tuple[int, torch.Tensor]] = []  # (the step a batch trains, its counts)
        self.handle: Any = None  # the forward pre-hook's, removed when the guard closes
        self.folded: torch.Tensor | None = None
        self.totals = LabelTotals()

    def pre_forward(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if not module.training or not torch.is_grad_enabled() or self.monitor.broken:
            return
        if torch.compiler.is_compiling():  # traced by torch.compile: a no-op, no graph break
            return
        labels = kwargs.get("labels")
        input_ids = kwargs.get("input_ids", args[0] if args else None)
        if not isinstance(labels, torch.Tensor) or not isinstance(input_ids, torch.Tensor):
            return
        contained(self.monitor, "llm_label_watch", self._keep, labels, input_ids, kwargs)

    def _keep(self, labels: torch.Tensor, input_ids: torch.Tensor, kwargs: dict[str, Any]) -> None:
        if labels.dim() != 2 or labels.shape != input_ids.shape or labels.shape[1] < 2:
            return
        if labels.dtype.is_floating_point or input_ids.dtype.is_floating_point:
            return
        if labels.device != input_ids.device:  # compared element by element: one device only
            return
        context = {key: same_shape(kwargs.get(key), labels) for key in CONTEXT}
        vector = measure(labels, input_ids, context, self._counting(labels.device))
        self.pending.append((self.monitor.step + 1, vector))  # the step this batch trains
        self.totals.rows += labels.shape[0]
        if len(self.pending) >= _FOLD_AT:
            self._fold()

    def _counting(self, device: torch.device) -> Counting:
        counting = self._countings.get(device)
        if counting is None:
            eos = torch.tensor(sorted(self.eos), device=device) if self.eos else None
            zero = torch.zeros((), dtype=torch.long, device=device)
            counting = Counting(eos=eos, pad=self.pad, shift=self.shifts_inside, zero=zero)
            self._countings[device] = counting
        return counting

    def _settle(self) -> None:
        """Stop the counts whose finding the totals have settled (observed, or out of reach)."""
        counts, reported = self.totals.counts, self.monitor.reported
        eos_done = tor011.settled(counts) or tor011.OBSERVATION in reported
        shift_done = tor013.settled(self.totals.evidence()) or tor013.OBSERVATION in reported
        for device, counting in list(self._countings.items()):
            self._countings[device] = Counting(
                eos=None if eos_done else counting.eos,
                pad=counting.pad,
                shift=counting.shift and not shift_done,
                zero=counting.zero,
            )

    def _fold(self) -> None:
        """Sum the kept vectors on the device (no read): memory stays bounded between checks."""
        steps = [s for s, _ in self.pending]
        total = torch.stack([v.to(self.pending[0][1].device) for _, v in self.pending]).sum(0)
        if self.folded is not None:
            total = total + self.folded.to(total.device)
        self.folded = total
        self.totals.batches += len(steps)
        self._steps_seen(steps)
        self.pending.clear()

    def _steps_seen(self, steps: list[int]) -> None:
        if steps:
            totals = self.totals
            totals.first_step = steps[0] if totals.first_step is None else totals.first_step
            totals.last_step = steps[-1]

    def read(self) -> None:
        """Add the kept counts to the totals: one host read."""
        if self.pending:
            self._fold()
        if self.folded is None:
            return
        values = self.folded.tolist()
        self.folded = None
        for name, value in zip(FIELDS, values, strict=True):
            self.totals.counts[name] += int(value)

    def on_check(self, step: int) -> None:
        self.read()
        self.judge(step)
        self._settle()

    def on_close(self) -> None:
        if self.handle is not None:
            self.handle.remove()
            self.handle = None
        self.read()
        self.judge(self.monitor.step)

    def judge(self, step: int) -> None:
        if self.totals.batches == 0:
            return
        evidence = self.totals.evidence()
        context: dict[str, Any] = {"eos_ids": sorted(self.eos), "model_class": self.model_class}
        if self.eos_names:  # the tokenizer names them; without one only the ids are known
            context["eos_tokens"] = self.eos_names
        if self.pad_is_eos is not None:
            context["pad_is_eos"] = self.pad_is_eos
        verdicts = (
            (tor010.CHECK_ALL, tor010.judge_all(evidence)),
            (tor010.CHECK_SHARE, tor010.judge_share(evidence)),
            (tor011.OBSERVATION, tor011.judge(evidence, eos_known=bool(self.eos))),
            (tor013.OBSERVATION, tor013.judge(evidence, shifts_inside=self.shifts_inside)),
        )
        for check, verdict in verdicts:
            if verdict:
                self.monitor.observe(check, {**evidence, **context}, step=step)
