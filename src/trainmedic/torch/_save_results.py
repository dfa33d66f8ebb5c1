"""What the save checks' results show (`trainmedic.torch._saves`), observed for the rules.

The worker (`_save_worker`) measures and judges nothing; here each result becomes the
observations `tor015_saved_model_differs` and `tor016_adapter_saved_empty` judge, with the
tensors, outputs and paths as evidence; and each model folder saved after a chat template was
rendered is asked for that template.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainmedic.rules.tor import tor015_saved_model_differs as tor015
from trainmedic.rules.tor import tor016_adapter_saved_empty as tor016

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike
    from trainmedic.torch._saves import Job

# A Trainer's intermediate checkpoints are for resuming, not serving: no tokenizer is asked of them.
CHECKPOINT_DIR = re.compile(r"checkpoint-\d+$")
# What the worker tells of tied weights the reload did not tie as memory had them (`tie_changes`).
TIE_EVIDENCE = ("ties_lost", "ties_added", "not_saved", "tie_word_embeddings")
# What a reload in the training process tells of a file it could not load (`_save_reload`): the
# keys against the module's, with the prefix that maps them; the arguments `__init__` missed.
KEY_EVIDENCE = (
    "model_tensors",
    "state_dict_keys",
    "missing",
    "unexpected",
    "missing_examples",
    "unexpected_examples",
    "strip",
    "add",
    "prefix_matches",
    "missing_arguments",
)


def observe(monitor: MonitorLike, job: Job, result: Mapping[str, Any]) -> None:
    """What one save's result shows, observed for the rules to judge."""
    base = {"path": job.path, "where": job.where, "saved_at_step": job.step}
    tensors = result.get("tensors") or {}
    adapter = job.kind == "peft" or int(tensors.get("adapter", 0)) > 0
    emptiness = tor016.judge(
        adapter=adapter,
        empty=int(tensors.get("empty", 0)),
        lora_b=int(tensors.get("lora_b", 0)),
        lora_b_zero=int(tensors.get("lora_b_zero", 0)),
        trained_steps=monitor.step,
    )
    if emptiness is not None:
        monitor.observe(
            tor016.OBSERVATION,
            {**base, "reason": emptiness, "trained_steps": monitor.step, **_tensor_evidence(tensors)},
            once=False,
            step=job.step or None,
        )
        if emptiness == tor016.EMPTY:
            return  # an empty adapter does not reload: TOR016 says why
    if int(tensors.get("nonfinite", 0)) or (int(tensors.get("empty", 0)) and not adapter):
        kind = tor015.NONFINITE if int(tensors.get("nonfinite", 0)) else tor015.EMPTY
        monitor.observe(
            tor015.RELOAD_OBSERVATION,
            {**base, "kind": kind, **_tensor_evidence(tensors)},
            once=False,
            step=job.step or None,
        )
        return
    spec = json.loads((job.scratch / "job.json").read_text())
    how = {k: spec[k] for k in ("loader", "probe") if spec.get(k)}
    if result.get("reload_error"):
        evidence = {
            **base,
            "kind": tor015.RELOAD_FAILED,
            "error": result["reload_error"],
            "saved": job.kind,
            **how,
            **{k: result[k] for k in KEY_EVIDENCE if k in result},
        }
        monitor.observe(tor015.RELOAD_OBSERVATION, evidence, once=False, step=job.step or None)
        return
    if "max_abs_diff" in result:
        measure = {k: float(result[k]) for k in ("max_abs_diff", "output_scale", "argmax_agree")}
        if tor015.judge_outputs(dtype=spec.get("dtype", "float32"), **measure) is not None:
            evidence = {
                **base,
                "kind": tor015.OUTPUTS_DIFFER,
                "saved": job.kind,
                "dtype": spec.get("dtype"),
                **how,
                **measure,
                **{k: result[k] for k in TIE_EVIDENCE if k in result},
            }
            monitor.observe(tor015.RELOAD_OBSERVATION, evidence, once=False, step=job.step or None)


def _tensor_evidence(tensors: Mapping[str, Any]) -> dict[str, Any]:
    keys = (
        "total",
        "empty",
        "empty_examples",
        "nonfinite",
        "nonfinite_examples",
        "lora_b",
        "lora_b_zero",
        "files",
    )
    return {k: tensors.get(k) for k in keys}


def check_tokenizers(monitor: MonitorLike, folders: Mapping[str, set[str]]) -> None:
    """Each model folder saved (not a Trainer's `checkpoint-N`) after a chat template was rendered
    holds that template: the tokenizer is saved beside the model."""
    for folder, templates in folders.items():
        if not templates or CHECKPOINT_DIR.search(folder) or not Path(folder).is_dir():
            continue
        saved = saved_template(Path(folder))
        if saved is not None and saved in templates:
            continue
        evidence = {
            "kind": tor015.TOKENIZER_MISSING if saved is None else tor015.TEMPLATE_DIFFERS,
            "path": folder,
            "where": "",
            "template_chars": len(next(iter(templates))),
        }
        monitor.observe(tor015.RELOAD_OBSERVATION, evidence, once=False)


def saved_template(folder: Path) -> str | None:
    """The chat template a tokenizer saved in `folder` carries (None: no tokenizer or no template)."""
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text()
    config = folder / "tokenizer_config.json"
    if config.is_file():
        template = json.loads(config.read_text()).get("chat_template")
        if isinstance(template, str):
            return template
    return None
