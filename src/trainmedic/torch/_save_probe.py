"""The probe of the save checks (`trainmedic.torch._saves`): the outputs of a model in memory.

A probe is `PROBE_TOKENS` token ids drawn from a generator of its own (the run's random state is
not touched) in the vocabulary of the model's config; its outputs are computed once, under
no_grad in eval mode (every module's training flag restored after), with the guard's hooks
paused so that the probe is not counted as a training forward (`pause`: the guard's
`_patches.paused`, handed down by `_saves`; this module never imports the patches). The saves
hand the probe and its outputs to the worker; `merge_and_unload` compares the merged model's
outputs with the adapter model's here.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import torch
from trainmedic.rules.tor import tor015_saved_model_differs as tor015
from trainmedic.torch._save_worker import output_of

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike

#: The guard's hooks paused for the while (`_patches.paused`).
Pause = Callable[[], AbstractContextManager[None]]

PROBE_TOKENS = 32  # one row: enough tokens to go through every layer, a sequence-classifier's pad-free batch


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


def snapshot(model: Any, kind: str, scratch: Path, pause: Pause) -> dict[str, Any] | None:
    """The probe's inputs and the model's outputs for them, saved to the scratch folder; None
    for a model the probe does not fit (no vocabulary: not a text model; an adapter other than
    PEFT's `default`, saved in a subfolder; a quantized model; a model whose forward needs more
    than `input_ids`, such as an encoder-decoder's): its files are read back, it is not reloaded.
    `pause` is `contextlib.nullcontext` on a copy probed in a thread of its own (`_save_copy`):
    pausing the guard's hooks is process-wide and would blind them to the training thread."""
    base = model.get_base_model() if kind == "peft" else model
    config = getattr(base, "config", None)
    vocab = getattr(config, "vocab_size", None)
    if not isinstance(vocab, int) or vocab < 1 or config is None:
        return None
    if kind == "peft" and getattr(model, "active_adapter", None) != "default":
        return None
    if getattr(config, "quantization_config", None) is not None:  # reloading needs its kernels (a GPU)
        return None
    ids = torch.randint(0, vocab, (1, PROBE_TOKENS), generator=torch.Generator().manual_seed(0))
    param = next(model.parameters())
    inputs = {"input_ids": ids}
    try:
        expected = outputs(model, {"input_ids": ids.to(param.device)}, pause)
    except (TypeError, ValueError, RuntimeError):  # the forward asks for more than input_ids
        return None
    if expected is None:
        return None
    torch.save({"inputs": inputs, "expected": expected}, scratch / "probe.pt")
    spec: dict[str, Any] = {
        "dtype": str(param.dtype).removeprefix("torch."),
        "model_class": f"{type(base).__module__}:{type(base).__qualname__}",
    }
    if kind == "peft":
        adapter = model.peft_config[model.active_adapter]
        spec["base"] = adapter.base_model_name_or_path
        config.save_pretrained(scratch / "base_config")
    return spec


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


def merge_probe(tuner: Any, pause: Pause) -> tuple[dict[str, Any], Any, str] | None:
    config = getattr(getattr(tuner, "model", None), "config", None)
    if config is None or not getattr(config, "vocab_size", None):
        return None
    ids = torch.randint(
        0, int(config.vocab_size), (1, PROBE_TOKENS), generator=torch.Generator().manual_seed(0)
    )
    param = next(tuner.model.parameters())
    inputs = {"input_ids": ids.to(param.device)}
    try:
        expected = outputs(tuner.model, inputs, pause)
    except (TypeError, ValueError, RuntimeError):  # the forward asks for more than input_ids
        return None
    return inputs, expected, str(param.dtype).removeprefix("torch.")


def after_merge(
    monitor: MonitorLike,
    merged: Any,
    before: tuple[dict[str, Any], Any, str],
    caller: FrameType,
    pause: Pause,
) -> None:
    inputs, expected, dtype = before
    got = outputs(merged, inputs, pause)
    if got is None or expected is None:
        return
    measure = distance(got, expected)
    reason = tor015.judge_outputs(dtype=dtype, **measure)
    if reason is None:
        return
    evidence = {
        "kind": tor015.MERGE_DRIFT,
        "path": "",
        "where": where(caller),
        "model": type(merged).__name__,
        "dtype": dtype,
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
