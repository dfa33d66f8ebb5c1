"""The parameter watch of fine-tuning: adapters that never learn, new token rows never trained.

- Adapters (TOR012, `AdapterWatch`): the tensors of a PEFT model's active adapters, found as
  PEFT finds them (every `BaseTunerLayer`'s `adapter_layer_names`, a prompt-learning model's
  `prompt_encoder`; parameter names when neither is there). On checked steps, before the
  update, it reads whether each got a non-zero gradient, and compares each tensor's sum and
  norm with those at the first checked step; at the end once more.
- New token rows (TOR014, `NewRowsWatch`): the rows `PreTrainedModel.resize_token_embeddings`
  added, learned by wrapping that method (`install`: the post-import hook on
  `transformers.modeling_utils` under `trainmedic run`, and `trainmedic.hf` on import). A model
  resized before either ran is not known to have new rows, and is not watched. On watched
  forward passes it keeps the model's input ids and attention mask; on checked steps it reads
  which added ids occur in the attended positions (pad ids left out) and compares each added
  row's sum and norm (input embedding, and the output head when not tied) with the first
  checked step's.

Cost: nothing per step for adapters; for a resized model, one forward pre-hook on the model
that returns at once unless the guard's forward watch is open (a checked step's forward). On
checked steps: one batched read of the adapters' gradient norms, sums and norms (no copy of a
tensor), and, for new rows, the unique added ids of the kept inputs and a sum and a norm per
added row (at most `MAX_ROWS` rows). The rule files decide (`judge`).
"""

from __future__ import annotations

import contextlib
import functools
import weakref
from typing import TYPE_CHECKING, Any

import torch
from trainmedic.rules.tor import tor012_adapters_not_learning as tor012
from trainmedic.rules.tor import tor014_new_tokens_untrained as tor014
from trainmedic.rules.tor.tor001_frozen_parameters import PEFT_PARTS
from trainmedic.torch._reads import floats, norms, readable

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike

#: The added rows read per matrix (a resize that adds tens of thousands reads the first ones).
MAX_ROWS = 1024
#: The input tensors kept between two checked steps (a watched step with gradient accumulation).
MAX_KEPT_INPUTS = 8
#: The adapter tensors named in the evidence.
MAX_NAMES = 20

# A model PEFT wrapped: where no adapter layer is found, its adapter tensors are found by name.
_PEFT_MODELS = frozenset({"PeftModel", "PeftMixedModel"})
# (rows before, rows after) of each model `resize_token_embeddings` grew.
_resized: weakref.WeakKeyDictionary[Any, tuple[int, int]] = weakref.WeakKeyDictionary()


# -- learning the resize ----------------------------------------------------------------------
def install(module: Any) -> None:
    """Wrap `PreTrainedModel.resize_token_embeddings` of `transformers.modeling_utils` (once)."""
    cls = getattr(module, "PreTrainedModel", None)
    original = getattr(cls, "resize_token_embeddings", None)
    if original is None or getattr(original, "_trainmedic", False):
        return

    @functools.wraps(original)
    def resize_token_embeddings(self: Any, *args: Any, **kwargs: Any) -> Any:
        before = _rows(self)
        result = original(self, *args, **kwargs)
        with contextlib.suppress(Exception):  # the bookkeeping never breaks the user's call
            _note_resize(self, before, _rows(self))
        return result

    resize_token_embeddings._trainmedic = True  # type: ignore[attr-defined]
    cls.resize_token_embeddings = resize_token_embeddings  # type: ignore[union-attr]


def _rows(model: Any) -> int | None:
    try:
        return int(model.get_input_embeddings().weight.shape[0])
    except Exception:
        return None


def _note_resize(model: Any, before: int | None, after: int | None) -> None:
    if before is None or after is None:
        return
    first = _resized[model][0] if model in _resized else before
    if after > first:
        _resized[model] = (first, after)
    else:
        _resized.pop(model, None)


def resized_rows(model: Any) -> tuple[int, int] | None:
    """(rows before, rows after) when `resize_token_embeddings` added rows to `model`."""
    return _resized.get(model)


# -- attaching --------------------------------------------------------------------------------
def attach(model: Any, monitor: MonitorLike, *, tokenizer: Any = None) -> None:
    """Watch `model`'s adapters and its resized token rows for `monitor` (each when it has them)."""
    adapters = adapter_tensors(model)
    if adapters:
        monitor.watchers.append(AdapterWatch(monitor, model, adapters))
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    added = _resized.get(base)
    if added is not None:
        rows = NewRowsWatch.of(monitor, base, added, tokenizer)
        if rows is not None:
            monitor.watchers.append(rows)


def adapter_tensors(model: Any) -> dict[str, Any]:
    """The trainable tensors of `model`'s active adapters, by their names in `model`."""
    found: dict[int, Any] = {}
    for module in model.modules():
        if not _is_tuner_layer(module) or getattr(module, "disable_adapters", False):
            continue
        layer_names = getattr(module, "adapter_layer_names", ())
        for layer_name in layer_names:
            layers = getattr(module, layer_name, None)
            for adapter in getattr(module, "active_adapters", ()):
                if layers is not None and adapter in layers:
                    part = layers[adapter]
                    for p in part.parameters() if isinstance(part, torch.nn.Module) else [part]:
                        found[id(p)] = p
    encoders = getattr(model, "prompt_encoder", None)  # prompt tuning, prefix tuning, P-tuning
    active = getattr(model, "active_adapter", None)
    if isinstance(encoders, torch.nn.ModuleDict) and isinstance(active, str) and active in encoders:
        found.update((id(p), p) for p in encoders[active].parameters())
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad and _readable_here(p)]
    if found:
        return {n: p for n, p in named if id(p) in found}
    if not any(cls.__name__ in _PEFT_MODELS for cls in type(model).__mro__):
        return {}  # a model's own built-in "lora_" parts are not an adapter being fine-tuned
    return {n: p for n, p in named if any(part in n for part in PEFT_PARTS if part != "modules_to_save.")}


def _readable_here(param: Any) -> bool:
    """A tensor whose values and gradient live in it: not a DeepSpeed ZeRO-3 placeholder, nor
    an FSDP2 shard (DTensor), whose reads would be empty or collective."""
    kinds = {type(param).__name__, type(param.data).__name__}
    return param.numel() > 0 and not hasattr(param, "ds_id") and "DTensor" not in kinds


def _is_tuner_layer(module: Any) -> bool:
    """A PEFT adapter layer (LoRA, IA3, LoHa...): not a `modules_to_save` copy, which trains the
    whole module, nor `trainable_token_indices`' rows (TOR014's)."""
    kinds = {cls.__name__ for cls in type(module).__mro__}
    return "BaseTunerLayer" in kinds and "TrainableTokensLayer" not in kinds


def _fingerprints(tensors: list[Any]) -> list[float]:
    """Each tensor's sum and norm, in one host read (no copy of a tensor)."""
    with torch.no_grad():
        detached = [t.detach() for t in tensors]
        sums = [t.sum(dtype=torch.float32) for t in detached]
        return floats([v for pair in zip(sums, norms(detached), strict=True) for v in pair])


class AdapterWatch:
    """TOR012: whether the active adapters' tensors get gradients and change."""

    def __init__(self, monitor: MonitorLike, model: Any, adapters: dict[str, Any]) -> None:
        self.monitor = monitor
        self.names = list(adapters)
        self.refs = [weakref.ref(p) for p in adapters.values()]
        chosen = {id(p) for p in adapters.values()}
        others = [(n, p) for n, p in model.named_parameters() if p.requires_grad and id(p) not in chosen]
        self.others = [(n, weakref.ref(p)) for n, p in others]
        self.got_grad = [False] * len(self.names)
        self.grad_seen = [False] * len(self.names)  # a gradient tensor, zero or not
        self.others_with_grad: dict[str, None] = {}
        self.checked_steps: list[int] = []
        self.baseline: list[float] | None = None
        self.base_step = 0
        self.done = False

    def on_check(self, step: int) -> None:
        if self.done:
            return
        params = self._alive()
        if params is None:
            return
        self.checked_steps.append(step)
        self._read_grads(params)
        for name, ref in self.others:
            if len(self.others_with_grad) >= 5:  # named in the evidence: a few are enough
                break
            p = ref()
            if p is not None and p.grad is not None:
                self.others_with_grad[name] = None
        if self.baseline is None:
            self.baseline, self.base_step = _fingerprints(params), self.monitor.step
        else:
            self._judge(params, step)

    def on_close(self) -> None:
        params = self._alive()
        if not self.done and params is not None and self.baseline is not None:
            self._judge(params, self.monitor.step)

    def _alive(self) -> list[Any] | None:
        params = [ref() for ref in self.refs]
        return None if any(p is None for p in params) else params

    def _read_grads(self, params: list[Any]) -> None:
        with torch.no_grad():
            held = [(i, readable(p.grad)) for i, p in enumerate(params) if p.grad is not None]
            held = [(i, g) for i, g in held if g is not None]
            values = floats(norms([g for _, g in held]))
        for (i, _), value in zip(held, values, strict=True):
            self.grad_seen[i] = True
            if value != 0.0:  # NaN counts as a gradient: another finding's business
                self.got_grad[i] = True

    def _judge(self, params: list[Any], step: int) -> None:
        now = _fingerprints(params)
        assert self.baseline is not None
        held = self._in_optimizers(params)
        names = [n for i, n in enumerate(self.names) if i in held]
        unchanged = [
            n for i, n in enumerate(self.names) if now[2 * i : 2 * i + 2] == self.baseline[2 * i : 2 * i + 2]
        ]
        without_grad = [n for i, n in enumerate(self.names) if not self.got_grad[i]]
        updates = self.monitor.step - self.base_step
        stuck = tor012.judge(names, without_grad=without_grad, unchanged=unchanged, updates=updates)
        if not stuck:
            return
        self.done = True
        index = {n: i for i, n in enumerate(self.names)}
        evidence = {
            "count": len(stuck),
            "adapter_tensors": len(names),
            "params": stuck[:MAX_NAMES],
            "grad_none": not any(self.grad_seen[index[n]] for n in stuck),
            "checked_steps": list(self.checked_steps),
            "updates": updates,
            "other_trainable": len(self.others),
            "others_with_grad": list(self.others_with_grad),
        }
        self.monitor.observe(tor012.OBSERVATION, evidence, step=step)

    def _in_optimizers(self, params: list[Any]) -> set[int]:
        """The indices of `params` some optimizer holds (all, when the loop has none): a tensor
        left out of every optimizer is TOR001's."""
        held = {
            id(p) for opt in list(self.monitor.opts.keys()) for g in opt.param_groups for p in g["params"]
        }
        if not held:
            return set(range(len(params)))
        return {i for i, p in enumerate(params) if id(p) in held}


class NewRowsWatch:
    """TOR014: whether the rows a resize added change, for the added ids the inputs hold."""

    def __init__(
        self, monitor: MonitorLike, model: Any, matrices: list[tuple[str, Any]], rows: range, tokenizer: Any
    ) -> None:
        self.monitor = monitor
        self.rows = rows
        self.matrices = [(name, weakref.ref(module)) for name, module in matrices]
        self.tokenizer = tokenizer
        self.pad_ids: set[int] = set()
        for source in (tokenizer, getattr(model, "config", None), getattr(model, "generation_config", None)):
            pad = getattr(source, "pad_token_id", None)
            if isinstance(pad, int):
                self.pad_ids.add(pad)
        self.kept: list[tuple[Any, Any]] = []
        self.seen: set[int] = set()
        self.checked_steps: list[int] = []
        self.baseline: list[list[float]] | None = None
        self.base_step = 0
        self.done = False
        self.handle = model.register_forward_pre_hook(self._keep_ids, with_kwargs=True)

    @classmethod
    def of(
        cls, monitor: MonitorLike, model: Any, added: tuple[int, int], tokenizer: Any
    ) -> NewRowsWatch | None:
        embedding, head = model.get_input_embeddings(), model.get_output_embeddings()
        if embedding is None:
            return None
        matrices = [("input embedding", embedding)]
        if head is not None and not _same_weight(embedding, head):
            matrices.append(("output head", head))
        old, new = added
        return cls(monitor, model, matrices, range(old, min(new, old + MAX_ROWS)), tokenizer)

    def _keep_ids(self, module: Any, args: Any, kwargs: Any) -> None:
        """Every forward of the model: returns at once unless a checked step's forward runs; then
        keeps its input ids and attention mask (padding is no use of a token)."""
        if not self.monitor.forward.is_open or self.done or not torch.is_grad_enabled():
            return
        ids = kwargs.get("input_ids", args[0] if args else None)
        if isinstance(ids, torch.Tensor) and len(self.kept) < MAX_KEPT_INPUTS:
            mask = kwargs.get("attention_mask")
            usable = isinstance(mask, torch.Tensor) and mask.shape == ids.shape
            self.kept.append((ids.detach(), mask.detach() if usable else None))

    def on_check(self, step: int) -> None:
        if self.done:
            return
        self.checked_steps.append(step)
        self._read_ids()
        if self.baseline is None:
            self.baseline, self.base_step = self._fingerprints(), self.monitor.step
        else:
            self._judge(step)

    def on_close(self) -> None:
        self.handle.remove()
        self._read_ids()
        if not self.done and self.baseline is not None:
            self._judge(self.monitor.step)

    def _read_ids(self) -> None:
        kept, self.kept = self.kept, []
        with torch.no_grad():
            for ids, mask in kept:
                wanted = (ids >= self.rows.start) & (ids < self.rows.stop)
                if mask is not None:
                    wanted &= mask.bool()
                self.seen.update(int(i) for i in torch.unique(ids[wanted]).tolist())
        self.seen -= self.pad_ids

    def _fingerprints(self) -> list[list[float]]:
        """Per matrix, the sum and the norm of each added row (its values are not copied)."""
        found = []
        for _, ref in self.matrices:
            module = ref()
            blocks = [] if module is None else _row_blocks(module, self.rows)
            with torch.no_grad():
                pairs = [
                    torch.stack([b.sum(dim=1, dtype=torch.float32), _row_norms(b)], dim=1) for b in blocks
                ]
                found.append(torch.cat(pairs).flatten().tolist() if pairs else [])
        return found

    def _judge(self, step: int) -> None:
        if not self.seen:
            return
        assert self.baseline is not None
        now = self._fingerprints()
        matrices = []
        for (name, ref), before, after in zip(self.matrices, self.baseline, now, strict=True):
            module = ref()
            if module is None or len(before) != len(after) or not before:
                return
            changed = _changed_rows(before, after, self.rows)
            unchanged = sorted(i for i in self.seen if i not in changed)
            matrices.append(
                {"matrix": name, "trainable": _trainable(module, self.rows), "unchanged": unchanged}
            )
        updates = self.monitor.step - self.base_step
        stale = tor014.judge(matrices, seen=sorted(self.seen), updates=updates)
        if not stale:
            return
        self.done = True
        self.handle.remove()
        evidence = {
            "added_rows": [self.rows.start, self.rows.stop],
            "tokens_seen": sorted(self.seen)[:MAX_NAMES],
            "tokens_seen_count": len(self.seen),
            "tokens": self._tokens(sorted(self.seen)[:MAX_NAMES]),
            "matrices": [{**m, "unchanged": m["unchanged"][:MAX_NAMES]} for m in stale],
            "checked_steps": list(self.checked_steps),
            "updates": updates,
        }
        self.monitor.observe(tor014.OBSERVATION, evidence, step=step)

    def _tokens(self, ids: list[int]) -> list[str] | None:
        try:
            return [str(t) for t in self.tokenizer.convert_ids_to_tokens(ids)] if self.tokenizer else None
        except Exception:  # a tokenizer that cannot say: the ids are the evidence
            return None


def _same_weight(a: Any, b: Any) -> bool:
    try:
        return bool(a.weight.data_ptr() == b.weight.data_ptr())
    except Exception:
        return False


def _token_layer(module: Any) -> Any:
    """PEFT's `trainable_token_indices` layer of a wrapped embedding or head, else None."""
    layer = getattr(module, "token_adapter", None)
    return layer if hasattr(layer, "trainable_tokens_delta") else None


def _row_blocks(module: Any, rows: range) -> list[Any]:
    """The added rows' current values, as blocks of rows (views, not copies)."""
    layer = _token_layer(module)
    if layer is None:
        return [module.weight.detach()[rows.start : rows.stop]]
    adapter = layer.active_adapters[0]
    indices = list(layer.token_indices.get(adapter, []))
    delta, base = layer.trainable_tokens_delta[adapter].detach(), layer.base_layer.weight.detach()
    return [delta[indices.index(r)].unsqueeze(0) if r in indices else base[r].unsqueeze(0) for r in rows]


def _row_norms(block: Any) -> Any:
    return torch.linalg.vector_norm(block, dim=1, dtype=torch.float32)


def _changed_rows(before: list[float], after: list[float], rows: range) -> set[int]:
    """The rows whose sum or norm differs (the values are [sum, norm] per row)."""
    return {r for k, r in enumerate(rows) if before[2 * k : 2 * k + 2] != after[2 * k : 2 * k + 2]}


def _trainable(module: Any, rows: range) -> bool:
    layer = _token_layer(module)
    if layer is not None:
        adapter = layer.active_adapters[0]
        covered = set(layer.token_indices.get(adapter, []))
        delta = layer.trainable_tokens_delta[adapter]
        covered_trains = bool(delta.requires_grad) and set(rows) <= covered
        return covered_trains or bool(layer.base_layer.weight.requires_grad)
    return bool(module.weight.requires_grad)


__all__ = ["AdapterWatch", "NewRowsWatch", "adapter_tensors", "attach", "install", "resized_rows"]
