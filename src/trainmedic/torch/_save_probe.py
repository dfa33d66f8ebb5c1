"""The probe of the save checks (`trainmedic.torch._saves`): the outputs of a model in memory.

A probe is a row of the run's own batch, copied at the save (`_save_inputs`: the first row's
`input_ids` and `attention_mask`), or, when the model was not seen in a checked forward (or its
forward does not take that row), `PROBE_TOKENS` token ids drawn from a generator of its own (the
run's random state is not touched) in the vocabulary of the model's config; the spec says which
(`probe`). Its outputs are computed once, under
no_grad in eval mode (every module's training flag restored after), with the guard's hooks
paused so that the probe is not counted as a training forward (`pause`: the guard's
`_patches.paused`, handed down by `_saves`; this module never imports the patches). The saves
hand the probe and its outputs to the worker; `merge_and_unload` compares the merged model's
outputs with the adapter model's here, and its weights with the adapter's change
(`_merge_weights`).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import torch
from trainmedic.rules.tor import tor015_saved_model_differs as tor015
from trainmedic.torch import _merge_weights as merge_weights
from trainmedic.torch import _save_inputs as save_inputs
from trainmedic.torch._safety import contained
from trainmedic.torch._save_worker import output_of, tied_groups

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike

#: The guard's hooks paused for the while (`_patches.paused`).
Pause = Callable[[], AbstractContextManager[None]]

PROBE_TOKENS = 32  # one row: enough tokens to go through every layer, a sequence-classifier's pad-free batch
RANDOM = "random token ids"  # the probe when no batch of the run was seen (`_save_inputs`)


def where(caller: FrameType) -> str:
    """The script's line that saved: the first caller outside installed packages (the line that
    called `trainer.save_model()`, not the Trainer's own call to save_pretrained)."""
    frame: FrameType | None = caller
    while frame is not None and (
        "site-packages" in frame.f_code.co_filename or "dist-packages" in frame.f_code.co_filename
    ):
        frame = frame.f_back
    frame = frame or caller
    return f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}"


def snapshot(
    model: Any, kind: str, scratch: Path, pause: Pause, rows: save_inputs.Rows | None = None
) -> dict[str, Any] | None:
    """The probe's inputs and the model's outputs for them, saved to the scratch folder; None
    for a model the probe does not fit (no vocabulary: not a text model; an adapter other than
    PEFT's `default`, saved in a subfolder; a quantized model; a model whose forward needs more
    than `input_ids`, such as an encoder-decoder's): its files are read back, it is not reloaded.
    `pause` is `contextlib.nullcontext` on a copy probed in a thread of its own (`_save_copy`):
    pausing the guard's hooks is process-wide and would blind them to the training thread.
    `rows`: the run's own row, copied at the save (`_save_inputs`), else random token ids."""
    base = model.get_base_model() if kind == "peft" else model
    config = getattr(base, "config", None)
    vocab = getattr(config, "vocab_size", None)
    if not isinstance(vocab, int) or vocab < 1 or config is None:
        return None
    if kind == "peft" and getattr(model, "active_adapter", None) != "default":
        return None
    if getattr(config, "quantization_config", None) is not None:  # reloading needs its kernels (a GPU)
        return None
    param = next(model.parameters())
    found = probe_outputs(model, rows, vocab, pause)
    if found is None:
        return None
    inputs, expected, used = found
    inputs = {k: v.cpu() for k, v in inputs.items()}
    torch.save({"inputs": inputs, "expected": expected}, scratch / "probe.pt")
    spec: dict[str, Any] = {
        "probe": used,
        "dtype": str(param.dtype).removeprefix("torch."),
        "model_class": f"{type(base).__module__}:{type(base).__qualname__}",
        "tied": tied_groups(base),  # the copy keeps the model's ties (`_save_copy`)
    }
    if kind == "peft":
        adapter = model.peft_config[model.active_adapter]
        spec["base"] = adapter.base_model_name_or_path
        config.save_pretrained(scratch / "base_config")
    return spec


def probe_outputs(
    model: Any, rows: save_inputs.Rows | None, vocab: int, pause: Pause
) -> tuple[dict[str, Any], Any, str] | None:
    """The probe's inputs, `model`'s outputs on them and which probe it is: the run's row when
    one was seen and the forward takes it, else `PROBE_TOKENS` random token ids (None: the
    forward asks for more than `input_ids`)."""
    device = next(model.parameters()).device
    if rows is not None:
        with contextlib.suppress(TypeError, ValueError, RuntimeError, IndexError):
            inputs = {k: v.to(device) for k, v in rows.kwargs.items()}
            expected = outputs(model, inputs, pause)
            if expected is not None:
                return inputs, expected, rows.description
    ids = torch.randint(0, vocab, (1, PROBE_TOKENS), generator=torch.Generator().manual_seed(0))
    inputs = {"input_ids": ids.to(device)}
    try:
        expected = outputs(model, inputs, pause)
    except (TypeError, ValueError, RuntimeError):  # the forward asks for more than input_ids
        return None
    return None if expected is None else (inputs, expected, RANDOM)


def outputs(model: Any, inputs: dict[str, Any], pause: Pause) -> Any:
    """The model's main output on `inputs`, under no_grad in eval mode, unseen by the guard."""
    modes = [(m, m.training) for m in model.modules()]
    try:
        with pause(), torch.no_grad():
            model.eval()
            return output_of(model(**inputs))
    finally:
        for module, mode in modes:
            module.training = mode


@dataclass
class BeforeMerge:
    """What `merge_and_unload` is compared with: the adapter model's outputs on the probe (and the
    base's, with the adapter disabled), and the sampled rows of the LoRA layers' weights."""

    inputs: dict[str, Any] | None
    expected: Any  # the adapter model's outputs (None: no probe)
    base: Any  # the base's outputs, adapters disabled (None: not measured)
    dtype: str
    layers: list[merge_weights.Layer]


def merge_probe(tuner: Any, pause: Pause, adapter_names: list[str] | None = None) -> BeforeMerge | None:
    """Before the merge: the probe's outputs with the adapter and without it (two forwards of
    `PROBE_TOKENS` tokens), and the LoRA layers' sampled rows (`_merge_weights.before`)."""
    model = getattr(tuner, "model", None)
    if model is None:
        return None
    layers = merge_weights.before(tuner, adapter_names)
    param = next(model.parameters())
    dtype = str(layers[0].base.weight.dtype if layers else param.dtype).removeprefix("torch.")
    before = BeforeMerge(None, None, None, dtype, layers)
    vocab = getattr(getattr(model, "config", None), "vocab_size", None)
    if not isinstance(vocab, int) or vocab < 1:
        return before
    found = probe_outputs(model, save_inputs.rows_for(model, text=True), vocab, pause)
    if found is None:
        return before
    inputs, expected, _ = found
    try:
        with _adapters_disabled(model):
            base = outputs(model, inputs, pause)
    except (TypeError, ValueError, RuntimeError):  # the forward asks for more than input_ids
        return before
    before.inputs, before.expected, before.base = inputs, expected, base
    return before


@contextmanager
def _adapters_disabled(model: Any) -> Iterator[None]:
    """PEFT's layers run as the base (what `PeftModel.disable_adapter()` does), their flags set
    back after: PEFT's own toggle (`enable_adapters`) also sets the adapters' requires_grad."""
    flags = [(m, m._disable_adapters) for m in model.modules() if hasattr(m, "_disable_adapters")]
    try:
        for module, _ in flags:
            module._disable_adapters = True
        yield
    finally:
        for module, flag in flags:
            module._disable_adapters = flag


def after_merge(
    monitor: MonitorLike,
    merged: Any,
    before: BeforeMerge,
    caller: FrameType,
    pause: Pause,
) -> None:
    """The merged model against the adapter model: its outputs on the probe (TOR015 `merge-drift`),
    then the share of the adapter's weight change its weights hold (`merge-rounded`)."""
    measure: dict[str, Any] = {}
    kind = None
    if before.inputs is not None and before.expected is not None:
        got = outputs(merged, before.inputs, pause)
        if got is not None:
            measure = distance(got, before.expected)
            if tor015.judge_outputs(dtype=before.dtype, **measure) is not None:
                kind = tor015.MERGE_DRIFT
            if before.base is not None and before.base.shape == before.expected.shape:
                measure["adapter_effect"] = float((before.expected - before.base).abs().max())
    weights = merge_weights.lost(before.layers)
    if weights is not None:
        measure.update(weights)
        if kind is None and tor015.judge_merge(weight_lost=weights["weight_lost"]) is not None:
            kind = tor015.MERGE_ROUNDED
    if kind is None:
        return
    evidence = {
        "kind": kind,
        "path": "",
        "where": where(caller),
        "model": type(merged).__name__,
        "dtype": before.dtype,
        **measure,
    }
    monitor.observe(tor015.RELOAD_OBSERVATION, evidence, once=False, step=monitor.step or None)


def distance(got: Any, expected: Any) -> dict[str, float]:
    if got.shape != expected.shape:
        return {"max_abs_diff": float("inf"), "output_scale": 0.0, "argmax_agree": 0.0}
    return {
        "max_abs_diff": float((got - expected).abs().max()),
        "output_scale": float(expected.abs().max()),
        "argmax_agree": float((got.argmax(-1) == expected.argmax(-1)).float().mean()),
    }


def wrap_merge_and_unload(original: Any, active: Callable[[], MonitorLike | None], pause: Pause) -> Any:
    """PEFT's `merge_and_unload`, checked in the call: both models are in memory there
    (`merge_probe` before the merge, `after_merge` on what it returns)."""

    def merge_and_unload(self: Any, *args: Any, **kwargs: Any) -> Any:
        monitor = active()
        before = None
        if monitor is not None and not monitor.broken:
            names = kwargs.get("adapter_names", args[2] if len(args) > 2 else None)
            before = contained(monitor, "merge_and_unload", merge_probe, self, pause, names)
        merged = original(self, *args, **kwargs)
        if before is not None and monitor is not None and not monitor.broken:
            contained(
                monitor, "merge_and_unload", after_merge, monitor, merged, before, sys._getframe(1), pause
            )
        return merged

    return merge_and_unload
