"""Recognise a config file's kind and say what it means in one vocabulary (`TrainingConfig`).

Four kinds are read: DeepSpeed JSON, Hugging Face `TrainingArguments` dumps
(`args.to_dict()` / `to_json_string()`, with an embedded or referenced DeepSpeed
config), Accelerate config YAML (with its `deepspeed_config_file`), and a
training loop's own config (trainmedic's `fit` options or any flat/nested file
with batch, accumulation, precision and LR keys).

'auto' is resolved as the tool that reads the file resolves it:
- the HF Trainer fills every DeepSpeed 'auto' from its arguments
  (`HfTrainerDeepSpeedConfig.trainer_config_process`: micro batch <- per_device_train_batch_size,
  accumulation <- gradient_accumulation_steps, train_batch_size <- world x micro x accumulation,
  fp16/bf16.enabled <- fp16/bf16, lr <- learning_rate) and refuses a value that is
  not 'auto' but differs from its argument: those become `mismatches`;
- Accelerate fills train_batch_size from micro x accumulation x processes and the
  micro batch from the dataloader at `prepare()`: unknown here, so left `unresolved`;
- DeepSpeed alone does not resolve 'auto': such a value stays `unresolved`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from trainmedic.configcheck._readers import read_config
from trainmedic.errors import UsageError
from trainmedic.evidence.config_model import TrainingConfig

AUTO = "auto"

_LOOP_KEYS = {
    "micro_batch": (
        "per_device_train_batch_size",
        "per_device_batch_size",
        "micro_batch_size",
        "train_micro_batch_size_per_gpu",
        "batch_size_per_device",
        "batch_size",
    ),
    "grad_accum": (
        "grad_accum_steps",
        "gradient_accumulation_steps",
        "accumulate_grad_batches",
        "accumulation_steps",
    ),
    "global_batch": ("global_batch_size", "effective_batch_size", "total_batch_size", "train_batch_size"),
    "world_size": ("world_size", "num_devices", "devices", "gpus", "num_processes"),
    "lr": ("lr", "learning_rate", "base_lr", "max_lr", "peak_lr"),
    "warmup_steps": ("warmup_steps", "warmup_iters", "lr_warmup_steps", "num_warmup_steps"),
    "loss_scale": ("loss_scale", "static_loss_scale"),
}
_SCALER_FLAGS = ("grad_scaler", "use_grad_scaler", "use_loss_scaling", "loss_scaling")


def load(
    path: str | Path,
    *,
    world_size: int | None = None,
    hardware: str | None = None,
    role: str = "config",
) -> TrainingConfig:
    """Read and interpret one file; UsageError when it is unreadable or of no known kind."""
    file = Path(path)
    data = read_config(file)
    kind = recognise(data)
    if kind == "deepspeed":
        parts = _deepspeed(data, world_size=world_size)
    elif kind == "hf-training-args":
        parts = _hf_args(data, file, world_size=world_size)
    elif kind == "accelerate":
        parts = _accelerate(data, file, world_size=world_size)
    elif kind == "loop":
        parts = _loop(data, world_size=world_size)
    else:
        raise UsageError(
            f"{file}: not a recognised training config (expected DeepSpeed JSON, HF TrainingArguments, "
            "an Accelerate config, or a loop config with batch_size / gradient_accumulation_steps / "
            "precision / lr keys)"
        )
    return TrainingConfig(source=kind, file=str(file), role=role, hardware=hardware, **parts)


def recognise(data: Mapping[str, Any]) -> str | None:
    """The kind of a config mapping, from the keys only its tool writes."""
    if "per_device_train_batch_size" in data and ("output_dir" in data or "learning_rate" in data):
        return "hf-training-args"
    if {"distributed_type", "compute_environment"} & data.keys() or (
        "num_machines" in data and "mixed_precision" in data
    ):
        return "accelerate"
    deepspeed_keys = {"train_batch_size", "train_micro_batch_size_per_gpu", "zero_optimization"}
    if (
        deepspeed_keys & data.keys()
        or _is_enabled_block(data.get("fp16"))
        or _is_enabled_block(data.get("bf16"))
    ):
        return "deepspeed"
    flat = dict(_leaves(data))
    wanted = {k for keys in _LOOP_KEYS.values() for k in keys} | {
        "precision",
        "mixed_precision",
        "fp16",
        "bf16",
    }
    batchy = {*_LOOP_KEYS["micro_batch"], *_LOOP_KEYS["global_batch"], "precision", "mixed_precision"}
    if batchy & flat.keys() and len(wanted & flat.keys()) >= 1:
        return "loop"
    return None


def _is_enabled_block(value: Any) -> bool:
    return isinstance(value, Mapping) and "enabled" in value


# -- DeepSpeed ---------------------------------------------------------------------------------------
def _deepspeed(
    ds: Mapping[str, Any],
    *,
    world_size: int | None,
    fill: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Fields of a DeepSpeed config; `fill` maps field -> (args key, value) that 'auto' takes."""
    fill = fill or {}
    if "bfloat16" in ds and "bf16" not in ds:  # DeepSpeed's older spelling of the bf16 block
        ds = {**ds, "bf16": ds["bfloat16"]}
    unresolved: list[str] = []
    mismatches: list[dict[str, Any]] = []
    values: dict[str, Any] = {}
    for field_name, ds_key, topic in _DS_FIELDS:
        raw = _get(ds, ds_key)
        filled = fill.get(field_name)
        if raw == AUTO:
            if filled is not None and filled[1] is not None:
                values[field_name] = filled[1]
            else:
                unresolved.append(field_name)
                values[field_name] = None
            continue
        values[field_name] = raw
        if filled is not None and raw is not None and topic and raw != filled[1]:
            mismatches.append(
                {
                    "key": ds_key,
                    "config_value": raw,
                    "args_key": filled[0],
                    "args_value": filled[1],
                    "topic": topic,
                }
            )
    zero = ds.get("zero_optimization") if isinstance(ds.get("zero_optimization"), Mapping) else {}
    assert isinstance(zero, Mapping)
    fp16_block = ds.get("fp16") if isinstance(ds.get("fp16"), Mapping) else {}
    assert isinstance(fp16_block, Mapping)
    loss_scale = fp16_block.get("loss_scale")
    return {
        "world_size": world_size,
        "world_size_origin": "--world-size" if world_size is not None else "",
        "micro_batch": _as_int(values["micro_batch"]),
        "grad_accum": _as_int(values["grad_accum"]),
        "global_batch": _as_int(values["global_batch"]),
        "derives_global": values["global_batch"] is None and "global_batch" not in unresolved,
        "unresolved": unresolved,
        "fp16": _as_bool(values["fp16"]) or _as_bool(_get(ds, "amp.enabled")),
        "bf16": _as_bool(values["bf16"]),
        "loss_scale": _as_float(loss_scale),
        "lr": _as_float(values["lr"]),
        "warmup_steps": _as_float(_get(ds, "scheduler.params.warmup_num_steps")),
        "zero_stage": _as_int(zero.get("stage")) if zero else None,
        "offload_param": _device(zero.get("offload_param"), zero.get("cpu_offload_params")),
        "offload_optimizer": _device(zero.get("offload_optimizer"), zero.get("cpu_offload")),
        "mismatches": mismatches,
        "names": {
            "micro_batch": "train_micro_batch_size_per_gpu",
            "grad_accum": "gradient_accumulation_steps",
            "global_batch": "train_batch_size",
            "fp16": "fp16.enabled",
            "bf16": "bf16.enabled",
            "loss_scale": "fp16.loss_scale",
            "lr": "optimizer.params.lr",
            "warmup_steps": "scheduler.params.warmup_num_steps",
            "zero_stage": "zero_optimization.stage",
            "offload_param": "zero_optimization.offload_param.device",
            "offload_optimizer": "zero_optimization.offload_optimizer.device",
        },
    }


# (field, DeepSpeed key, topic of a mismatch with the trainer's arguments)
_DS_FIELDS = (
    ("micro_batch", "train_micro_batch_size_per_gpu", "batch"),
    ("grad_accum", "gradient_accumulation_steps", "batch"),
    ("global_batch", "train_batch_size", ""),  # checked by CFG001's arithmetic, not as a mismatch
    ("fp16", "fp16.enabled", "precision"),
    ("bf16", "bf16.enabled", "precision"),
    ("lr", "optimizer.params.lr", "optimizer"),
)


def _device(block: Any, legacy_flag: Any) -> str | None:
    if isinstance(block, Mapping):
        device = block.get("device")
        return None if device is None else str(device)
    if legacy_flag is True:  # pre-0.3.16 spelling: cpu_offload / cpu_offload_params
        return "cpu"
    return None


# -- Hugging Face TrainingArguments ------------------------------------------------------------------
def _hf_args(args: Mapping[str, Any], file: Path, *, world_size: int | None) -> dict[str, Any]:
    micro = _as_int(args.get("per_device_train_batch_size"))
    accum = _as_int(args.get("gradient_accumulation_steps")) or 1
    fp16 = bool(args.get("fp16") or args.get("fp16_full_eval"))
    bf16 = bool(args.get("bf16") or args.get("bf16_full_eval"))
    lr = _as_float(args.get("learning_rate"))
    warmup = _as_float(args.get("warmup_steps"))
    if not warmup:  # transformers 4.x wrote the ratio separately
        warmup = _as_float(args.get("warmup_ratio")) or warmup
    ds = _embedded(args.get("deepspeed"), file)
    base = {
        "world_size": world_size,
        "world_size_origin": "--world-size" if world_size is not None else "",
        "micro_batch": micro,
        "grad_accum": accum,
        "derives_global": True,
        "fp16": fp16,
        "bf16": bf16,
        "lr": lr,
        "warmup_steps": warmup,
        "names": {
            "micro_batch": "per_device_train_batch_size",
            "grad_accum": "gradient_accumulation_steps",
            "fp16": "fp16",
            "bf16": "bf16",
            "lr": "learning_rate",
            "warmup_steps": "warmup_steps",
        },
    }
    if ds is None:
        return base
    fill = {
        "micro_batch": ("per_device_train_batch_size", micro),
        "grad_accum": ("gradient_accumulation_steps", accum),
        "global_batch": (
            "train_batch_size (calculated)",
            micro * accum * world_size if micro and world_size else None,
        ),
        "fp16": ("fp16|fp16_full_eval", fp16),
        "bf16": ("bf16|bf16_full_eval", bf16),
        "lr": ("learning_rate", lr),
    }
    parts = _deepspeed(ds, world_size=world_size, fill=fill)
    for precision in ("fp16", "bf16"):  # not in the DeepSpeed file: the Trainer's argument decides
        if parts[precision] is None:
            parts["names"][precision] = precision
    parts["micro_batch"] = parts["micro_batch"] or micro
    parts["grad_accum"] = parts["grad_accum"] or accum
    parts["fp16"] = bool(parts["fp16"]) or fp16
    parts["bf16"] = bool(parts["bf16"]) or bf16
    parts["lr"] = parts["lr"] if parts["lr"] is not None else lr
    parts["warmup_steps"] = parts["warmup_steps"] if parts["warmup_steps"] is not None else warmup
    parts["unresolved"] = [u for u in parts["unresolved"] if u != "global_batch"]
    return parts


def _embedded(value: Any, file: Path) -> Mapping[str, Any] | None:
    """The DeepSpeed config of HF/Accelerate: inline, or a path relative to the file or cwd."""
    if isinstance(value, Mapping):
        return value
    if not isinstance(value, str) or not value:
        return None
    for candidate in (file.parent / value, Path(value)):
        if candidate.is_file():
            return read_config(candidate)
    raise UsageError(
        f"{file}: its DeepSpeed config {value!r} was not found (relative to {file.parent} or cwd)"
    )


# -- Accelerate --------------------------------------------------------------------------------------
def _accelerate(cfg: Mapping[str, Any], file: Path, *, world_size: int | None) -> dict[str, Any]:
    processes = _as_int(cfg.get("num_processes"))
    world = world_size if world_size is not None else processes
    precision = str(cfg.get("mixed_precision") or "no").lower()
    fp16, bf16 = precision == "fp16", precision == "bf16"
    ds_plugin = cfg.get("deepspeed_config") if isinstance(cfg.get("deepspeed_config"), Mapping) else {}
    assert isinstance(ds_plugin, Mapping)
    common = {
        "num_machines": _as_int(cfg.get("num_machines")),
        "num_processes": processes,
        "main_process_ip": cfg.get("main_process_ip"),
        "main_process_port": _as_int(cfg.get("main_process_port")),
    }
    origin = "--world-size" if world_size is not None else ("num_processes" if processes else "")
    ds = _embedded(ds_plugin.get("deepspeed_config_file"), file)
    if ds is not None:
        fill = {"fp16": ("mixed_precision", fp16), "bf16": ("mixed_precision", bf16)}
        parts = _deepspeed(ds, world_size=world, fill=fill)
        if parts["global_batch"] is None and "global_batch" in parts["unresolved"]:
            parts["unresolved"].remove("global_batch")  # Accelerate computes it at prepare()
            parts["derives_global"] = True
        parts["world_size_origin"] = origin
        parts["mismatches"] = [m for m in parts["mismatches"] if m["topic"] != "precision"]
        return {**parts, **common}
    names = {
        "fp16": "mixed_precision",
        "bf16": "mixed_precision",
        "grad_accum": "deepspeed_config.gradient_accumulation_steps",
        "zero_stage": "deepspeed_config.zero_stage",
        "offload_param": "deepspeed_config.offload_param_device",
        "offload_optimizer": "deepspeed_config.offload_optimizer_device",
    }
    return {
        "world_size": world,
        "world_size_origin": origin,
        "grad_accum": _as_int(ds_plugin.get("gradient_accumulation_steps")),
        "derives_global": True,
        "fp16": fp16,
        "bf16": bf16,
        "zero_stage": _as_int(ds_plugin.get("zero_stage")),
        "offload_param": _device({"device": ds_plugin.get("offload_param_device")}, None),
        "offload_optimizer": _device({"device": ds_plugin.get("offload_optimizer_device")}, None),
        "names": names,
        **common,
    }


# -- a training loop's own config --------------------------------------------------------------------
def _loop(data: Mapping[str, Any], *, world_size: int | None) -> dict[str, Any]:
    flat = dict(_leaves(data))
    values: dict[str, Any] = {}
    names: dict[str, str] = {}
    for field_name, keys in _LOOP_KEYS.items():
        for key in keys:
            if key in flat and _is_number(flat[key]):
                values[field_name], names[field_name] = flat[key], key
                break
    fp16, bf16 = _loop_precision(flat)
    names.update({"fp16": _precision_key(flat, "fp16"), "bf16": _precision_key(flat, "bf16")})
    loss_scale = values.get("loss_scale")
    for flag in _SCALER_FLAGS:
        if flat.get(flag) is True and loss_scale is None:
            loss_scale, names["loss_scale"] = 1.0, flag
    world = world_size if world_size is not None else _as_int(values.get("world_size"))
    global_batch = _as_int(values.get("global_batch"))
    return {
        "world_size": world,
        "world_size_origin": "--world-size" if world_size is not None else names.get("world_size", ""),
        "micro_batch": _as_int(values.get("micro_batch")),
        "grad_accum": _as_int(values.get("grad_accum")) or (1 if global_batch is not None else None),
        "global_batch": global_batch,
        "derives_global": global_batch is None,
        "fp16": fp16,
        "bf16": bf16,
        "loss_scale": _as_float(loss_scale),
        "lr": _as_float(values.get("lr")),
        "warmup_steps": _as_float(values.get("warmup_steps")),
        "names": names,
    }


def _loop_precision(flat: Mapping[str, Any]) -> tuple[bool, bool]:
    fp16 = flat.get("fp16") is True
    bf16 = flat.get("bf16") is True
    for key in ("precision", "mixed_precision", "amp_dtype", "dtype"):
        text = str(flat.get(key, "")).lower()
        if key == "dtype" and text not in ("float16", "bfloat16"):
            continue
        fp16 = fp16 or text in ("fp16", "16", "16-mixed", "16-true", "float16", "half")
        bf16 = bf16 or text.startswith("bf16") or text == "bfloat16"
    return fp16, bf16


def _precision_key(flat: Mapping[str, Any], precision: str) -> str:
    if flat.get(precision) is True:
        return precision
    for key in ("precision", "mixed_precision", "amp_dtype", "dtype"):
        if key in flat:
            return f"{key} ({flat[key]})"
    return precision


# -- small helpers -----------------------------------------------------------------------------------
def _leaves(data: Mapping[str, Any], depth: int = 0) -> Iterator[tuple[str, Any]]:
    """(key, value) of scalars, top level first, then nested sections (one level of nesting deep)."""
    nested: list[Mapping[str, Any]] = []
    for key, value in data.items():
        if isinstance(value, Mapping):
            nested.append(value)
        else:
            yield str(key), value
    if depth < 2:
        for section in nested:
            yield from _leaves(section, depth + 1)


def _get(data: Mapping[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)) and float(value).is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _as_float(value: Any) -> float | None:
    if _is_number(value):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None
