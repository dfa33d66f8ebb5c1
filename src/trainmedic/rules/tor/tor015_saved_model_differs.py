"""TOR015 `saved-model-differs`: a checkpoint loaded with `strict=False` whose keys miss the model,
or a saved model that does not reload as the model in memory.

Collector: the PyTorch guard (`trainmedic.torch._loads`), which wraps `nn.Module.load_state_dict`
(under `trainmedic run` when torch is imported, or with `trainmedic.torch.guard()`). For a call with
`strict=False` that left keys on either side, it measures what PyTorch returns and does not raise:
the model's parameters and persistent buffers (`model_tensors`), the keys of the state dict
(`state_dict_keys`), how many of the model's were not loaded (`missing`) and how many of the
file's matched nothing (`unexpected`), a few of each (`missing_examples`, `unexpected_examples`),
the renaming of the file's keys that would load the most of them (`strip`, then `add`, a leading
prefix such as DDP's `module.` or torch.compile's `_orig_mod.`, with `prefix_matches`, the keys it
would load), the unexpected entries that are state dicts themselves (`nested`: a whole
checkpoint passed for its `model` entry), the model's class and the caller's line (`where`). It calls
`judge`, and observes `load_keys_mismatch` with the evidence and the `reason` when it fires.

Second collector: `trainmedic.torch._saves` (saves, reloaded in a separate process by
`trainmedic.torch._save_worker`). It observes `saved_reload_differs` with a `kind`:
`outputs-differ` (the model reloaded with the framework's loader answers the probe otherwise than
the model in memory did: `max_abs_diff`, `output_scale`, `argmax_agree`, `dtype`, `saved` for the
save's kind, `probe` (a row of the run's batch at a step, or random token ids), `loader` when not
the framework's `from_pretrained`; and when the model's tied parameters are not tied alike in the reload, `ties_lost`
and `ties_added`, groups of names that were one tensor on one side only, `not_saved`, the names
of a lost tie the weight files lack, and the saved config's `tie_word_embeddings`), `merge-drift` (the same for `merge_and_unload`'s model against the adapter model),
`merge-rounded` (the merged weights hold less than half of the adapter's weight change:
`weight_lost`, `merged_dtype`, `layers`, with the probe's `adapter_effect`, the largest move of the
outputs the adapter makes against the base with the adapter disabled; `judge_merge` decides),
`sharded` (a state dict saved with sharded tensors, FSDP's DTensor shards, not gathered:
`sharded`, `sharded_examples`, `shapes`),
`reload-failed` (`error`; for a plain state dict loaded strictly into a copy of its module in
the training process, `loader` and the keys, as for a `strict=False` load: `model_tensors`,
`state_dict_keys`, `missing`, `unexpected`, their examples, `strip`, `add`, `prefix_matches`; for
a Lightning module rebuilt with `load_from_checkpoint`, `missing_arguments`, those its `__init__`
required and the checkpoint's hyperparameters lacked), `nonfinite` or `empty` tensors written
(counts and a few names),
`tokenizer-missing` / `template-differs` (a model folder saved without the chat template that
training rendered). `judge_outputs` decides the outputs' cases.

Third collector: `trainmedic.keras._saves` (Keras 3's `Model.save` and `Model.save_weights`,
hence `ModelCheckpoint`, reloaded by `trainmedic.keras._save_worker`). It observes the same
`saved_reload_differs` with `saved` = `keras-model` or `keras-weights` and `loader` (how the file
was reloaded): `reload-failed` (`error`, and `missing_class` when Keras could not locate a class
that was not registered), `nonfinite` / `empty` weights written, `outputs-differ` (`probe`: fit's
first rows or inputs drawn in the shape of the model's inputs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmedic.events import Event
from trainmedic.findings import FindingSpec, Severity
from trainmedic.record import Rule
from trainmedic.rules._helpers.guard import names, observation_rule, observed
from trainmedic.rules._helpers.saves import effect_text, keys_text, renaming, shapes_text, ties_text

#: The guard's observation this finding words.
OBSERVATION = "load_keys_mismatch"

#: The save checks' observation (`trainmedic.torch._saves`) and its kinds.
RELOAD_OBSERVATION = "saved_reload_differs"
OUTPUTS_DIFFER, MERGE_DRIFT, RELOAD_FAILED = "outputs-differ", "merge-drift", "reload-failed"
MERGE_ROUNDED = "merge-rounded"
NONFINITE, EMPTY, SHARDED = "nonfinite", "empty", "sharded"
TOKENIZER_MISSING, TEMPLATE_DIFFERS = "tokenizer-missing", "template-differs"

# The reloaded (or merged) model's outputs on the probe may differ from the ones in memory by
# the rounding of the arithmetic only: the same weights in the same dtype, summed in another
# order (another device, another kernel, TF32 matmuls on a GPU: 10-bit mantissas, ~1e-3 of the
# output's scale after a few layers; bf16/fp16: 8-11 bits, ~1e-2). A weight that did not come
# back (a random head, embeddings reset, an adapter lost) moves the outputs by an amount of
# the order of the outputs themselves. The tolerance is a share of the largest output
# magnitude, 10x above rounding for each width, and 10x below a lost tensor's effect.
OUTPUT_TOLERANCE = {"float32": 0.01, "float64": 0.01}
HALF_TOLERANCE = 0.05

# A merge writes W + ΔW into the base weight's dtype. In float32 the sum is exact to float32's
# rounding (2^-24 of |W|): the share of ΔW the merged weights miss is ~1e-6 for any adapter that
# trained. In a 16-bit dtype each merged weight is within half a unit in the last place of W
# (bfloat16: 2^-9 to 2^-8 of |W|, 8 significant bits; float16: 2^-12 to 2^-11, 11 bits), and the
# base's values are representable there: a change below that rounds back to W and is dropped
# whole. The share lost is then about min(1, resolution x |W| / |ΔW|): an adapter trained at
# the usual LoRA rates (1e-4 to 2e-4) changes its weights by several units in the last place
# and loses a few percent to a bfloat16 merge (the rounding any 16-bit model carries); one
# trained at the rates of preference and RL fine-tuning (TRL's DPO and GRPO default to 1e-6)
# changes them by less than one, and its merge keeps little of it. Above half, the merged model
# carries less of the adapter than it misses: it is no longer base + adapter.
MERGE_LOST_SHARE = 0.5

#: The two reasons `judge` gives.
PREFIX, MOSTLY_UNLOADED = "prefix", "mostly-unloaded"

# A renaming of the file's keys (a prefix stripped or added) explains the mismatch when it
# would load at least this share of the keys on the smaller side (of the model's keys not loaded,
# and the file's keys unused). Names of a healthy model and of another checkpoint do not map
# onto each other by one prefix for half of them by chance; a wrapper's prefix (DDP's `module.`,
# torch.compile's `_orig_mod.`, a LightningModule's attribute) maps all of them. A prefix that
# is not a wrapper's counts only with most of the model unloaded (MOSTLY): an old head and a
# new one named otherwise (`fc.` against `head.`) map by a prefix too, and are a minority.
PREFIX_SHARE = 0.5
# Without such a prefix, the load is judged failed when most of the model was not loaded AND
# most of the file was not used: the two do not share their names. Each alone has intended
# uses: a new head or a few new layers are a minority of a model's tensors; a deliberate partial
# load (an adapter, one shard of a sharded checkpoint, a backbone into a larger model) leaves
# most of the model as it was, but every key it holds is the model's; a pretrained checkpoint
# with a task head of its own leaves that head (a minority of its keys) unused.
MOSTLY = 0.5
# The attributes wrappers put in front of every key of their state_dict(): DistributedDataParallel
# and DataParallel (`module`), torch.compile's OptimizedModule (`_orig_mod`).
WRAPPER_PARTS = frozenset({"module", "_orig_mod"})


def _example() -> list[Event]:
    """plain.load_state_dict(ddp_model.state_dict(), strict=False): every key has `module.`."""
    keys = ["body.0.weight", "body.0.bias", "head.weight", "head.bias"]
    return observed(
        OBSERVATION,
        reason=PREFIX,
        model="MLP",
        where="finetune.py:41",
        model_tensors=4,
        state_dict_keys=4,
        missing=4,
        unexpected=4,
        missing_examples=keys,
        unexpected_examples=[f"module.{key}" for key in keys],
        strip="module.",
        add="",
        prefix_matches=4,
        nested=[],
    )


SPEC = FindingSpec(
    code="TOR015",
    slug="saved-model-differs",
    severity=Severity.ERROR,
    title="Saved model differs",
    what=(
        "The model a checkpoint was loaded into is not the model that was saved: "
        "load_state_dict(..., strict=False) matched few or none of the checkpoint's keys (a "
        "`module.` prefix from DDP, `_orig_mod.` from torch.compile, another model's names), so "
        "the model kept its initial values; the keys not loaded, the prefix that explains them "
        "and the share of the model left unloaded are given. Or a saved model, reloaded as a user "
        "loads it, answers a probe otherwise than the model in memory (a head outside the "
        "adapter's modules_to_save, non-finite or empty tensors, a merge that drifts, a Keras "
        "custom layer that does not reload or reloads with another config), or its folder lacks "
        "the chat template training used."
    ),
    why=(
        "With strict=False, load_state_dict returns the missing and unexpected keys and raises "
        "nothing. A state_dict() taken from a DistributedDataParallel model names every key "
        "`module.<name>`, from a torch.compile'd module `_orig_mod.<name>`; loaded into the plain "
        "model, not one tensor matches, and training or evaluation goes on from random weights "
        "(a fine-tune that starts from scratch, an evaluation at chance). trainmedic reads the "
        "keys PyTorch returns at every strict=False load and looks for the prefix that maps them "
        "onto each other. It stays quiet on the intended uses: a backbone loaded into a model "
        "with a new head, an adapter or one shard loaded on purpose (every key in the file is the "
        "model's), a pretrained checkpoint whose own head is left out."
    ),
    example=(
        "torch.save(ddp_model.state_dict(), 'ckpt.pt'); "
        "model.load_state_dict(torch.load('ckpt.pt'), strict=False)  # every key starts with 'module.'"
    ),
    fix=(
        "Save the inner model (model.module.state_dict() under DDP, model._orig_mod.state_dict() "
        "after torch.compile), or strip the prefix before loading "
        "(torch.nn.modules.utils.consume_prefix_in_state_dict_if_present(state_dict, 'module.')); "
        "load with strict=True so that a mismatch raises, or check the keys load_state_dict returns."
    ),
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def judge(
    *,
    model_tensors: int,
    state_dict_keys: int,
    missing: int,
    unexpected: int,
    strip: str,
    add: str,
    prefix_matches: int,
) -> str | None:
    """Why a strict=False load failed (`PREFIX` or `MOSTLY_UNLOADED`), or None when it is healthy.

    A renaming by a wrapper's prefix is never intended. Another prefix counts only when most of
    the model was not loaded: a new head named differently from the old one (`fc.` against
    `head.`) also maps by a prefix, and is a minority of the model.
    """
    mostly_missing = model_tensors > 0 and missing > MOSTLY * model_tensors
    smaller = min(missing, unexpected)
    explained = smaller > 0 and prefix_matches >= max(1.0, PREFIX_SHARE * smaller)
    if explained and ((_wrapper_only(strip) and _wrapper_only(add)) or mostly_missing):
        return PREFIX
    if mostly_missing and state_dict_keys and unexpected > MOSTLY * state_dict_keys:
        return MOSTLY_UNLOADED
    return None


def judge_outputs(*, dtype: str, max_abs_diff: float, output_scale: float, argmax_agree: float) -> str | None:
    """`OUTPUTS_DIFFER` when the outputs differ by more than rounding (see OUTPUT_TOLERANCE)."""
    del argmax_agree  # evidence only: a head near a tie flips its argmax by rounding
    tolerance = OUTPUT_TOLERANCE.get(dtype, HALF_TOLERANCE) * max(output_scale, 1e-6)
    if not max_abs_diff <= tolerance:  # a NaN differs
        return OUTPUTS_DIFFER
    return None


def judge_merge(*, weight_lost: float) -> str | None:
    """`MERGE_ROUNDED` when the merged weights miss more than `MERGE_LOST_SHARE` of the
    adapter's weight change (a NaN misses it)."""
    if not weight_lost <= MERGE_LOST_SHARE:
        return MERGE_ROUNDED
    return None


def _wrapper_only(prefix: str) -> bool:
    """Whether a prefix is made of wrappers' prefixes only ("" included): `module._orig_mod.`."""
    return all(part in WRAPPER_PARTS for part in prefix.split(".")[:-1])


def message(evidence: Mapping[str, Any]) -> str:
    total, missing = evidence.get("model_tensors"), evidence.get("missing")
    loaded = int(total or 0) - int(missing or 0)
    where = f" at {evidence['where']}" if evidence.get("where") else ""
    text = (
        f"load_state_dict(strict=False){where} loaded {loaded} of the {total} parameters and "
        f"buffers of {evidence.get('model', 'the model')}; {missing} kept their initial values and "
        f"{evidence.get('unexpected')} of the checkpoint's {evidence.get('state_dict_keys')} keys "
        "matched nothing"
    )
    if evidence.get("reason") == PREFIX:
        text += f": {renaming(evidence)} ({evidence.get('prefix_matches')} keys differ only by it)"
    nested = evidence.get("nested")
    if nested:
        text += f"; the checkpoint holds whole dicts under {names(nested, 3)}: pass the model's entry"
    return (
        f"{text} (not loaded: {names(evidence.get('missing_examples'), 3)}; "
        f"unused: {names(evidence.get('unexpected_examples'), 3)})"
    )


def fix(evidence: Mapping[str, Any]) -> str | None:
    """The fix for the prefix found, in PyTorch's terms (None: the spec's)."""
    strip, add = evidence.get("strip") or "", evidence.get("add") or ""
    strict = "; load with strict=True so that a mismatch raises."
    if evidence.get("reason") != PREFIX:
        if evidence.get("nested"):
            entry = str(evidence["nested"][0])
            return f"Load the model's entry: model.load_state_dict(checkpoint[{entry!r}]){strict}"
        return None
    if strip and not add:
        saved = {"module.": "model.module.state_dict()", "_orig_mod.": "model._orig_mod.state_dict()"}
        save = f", or save {saved[strip]} instead" if strip in saved else ""
        return (
            "Strip the prefix before loading: torch.nn.modules.utils."
            f"consume_prefix_in_state_dict_if_present(state_dict, {strip!r}){save}{strict}"
        )
    if add and not strip:
        return (
            "Load into the submodule the checkpoint was saved from: "
            f"{_submodule(add)}.load_state_dict(state_dict){strict}"
        )
    return (
        f"Rename the keys: {{{add!r} + k.removeprefix({strip!r}): v for k, v in state_dict.items()}}{strict}"
    )


def _submodule(prefix: str) -> str:
    """'module.' -> model.module; 'layers.0.' -> model.layers[0]."""
    path = "model"
    for part in prefix.rstrip(".").split("."):
        path += f"[{part}]" if part.isdigit() else f".{part}"
    return path


def reload_message(evidence: Mapping[str, Any]) -> str:
    """The save checks' wording, per kind."""
    kind, path = evidence.get("kind"), evidence.get("path")
    where = f" at {evidence['where']}" if evidence.get("where") else ""
    if kind in (OUTPUTS_DIFFER, MERGE_DRIFT):
        loader = evidence.get("loader") or "its framework's loader"
        what = (
            f"the model merge_and_unload returned{where}"
            if kind == MERGE_DRIFT
            else f"the model saved to {path}{where}, reloaded with {loader},"
        )
        against = (
            "the adapter model before the merge" if kind == MERGE_DRIFT else "the model in memory at the save"
        )
        probe = evidence.get("probe")
        on = f" ({probe})" if probe and not str(evidence.get("saved", "")).startswith("keras") else ""
        return (
            f"{what} answers a probe{on} otherwise than {against}: outputs differ by up to "
            f"{evidence.get('max_abs_diff', 0):.3g} (largest output {evidence.get('output_scale', 0):.3g}, "
            f"{evidence.get('dtype')}); the top choice agrees on {100 * evidence.get('argmax_agree', 0):.0f}% of positions"
            + ties_text(evidence)
        )
    if kind == MERGE_ROUNDED:
        return (
            f"merge_and_unload{where} wrote {100 * (1 - min(1.0, evidence.get('weight_lost', 0))):.0f}% of the "
            f"adapter's weight change into the {evidence.get('merged_dtype')} base "
            f"({100 * evidence.get('weight_lost', 0):.0f}% lost to rounding, {evidence.get('layers')} LoRA layers): "
            "the change is below the base weights' resolution, and W + BA rounds back to W"
            + effect_text(evidence)
        )
    if kind == SHARDED:
        return (
            f"the save to {path}{where} wrote {evidence.get('sharded')} of its {evidence.get('total')} tensors "
            f"as shards of this process, not the whole parameters ({shapes_text(evidence)}): "
            "the other processes' parts are not in the file"
        )
    if kind == RELOAD_FAILED:
        loader = evidence.get("loader") or "its framework's loader"
        return (
            f"the model saved to {path}{where} does not reload with {loader}: {evidence.get('error')}"
            + keys_text(evidence)
        )
    if kind in (NONFINITE, EMPTY):
        count, examples = (
            (evidence.get("nonfinite"), evidence.get("nonfinite_examples"))
            if kind == NONFINITE
            else (evidence.get("empty"), evidence.get("empty_examples"))
        )
        state = "non-finite values (inf/NaN)" if kind == NONFINITE else "no values (empty)"
        return (
            f"the save to {path}{where} wrote {count} of its {evidence.get('total')} tensors with {state}: "
            f"{names(examples, 3)}"
        )
    state = (
        "no tokenizer with a chat template"
        if kind == TOKENIZER_MISSING
        else "a chat template other than training's"
    )
    return (
        f"the model folder {path} holds {state}, and training rendered its text with the tokenizer's chat "
        "template: served from this folder, prompts are rendered otherwise than in training"
    )


def reload_fix(evidence: Mapping[str, Any]) -> str | None:
    kind = evidence.get("kind")
    if str(evidence.get("saved", "")).startswith("keras"):
        return _keras_fix(evidence)
    if kind == OUTPUTS_DIFFER and evidence.get("saved") == "peft":
        return (
            "A part trained outside the adapter was not saved with it: list the task head and any resized "
            "embeddings in LoraConfig(modules_to_save=[...]) (e.g. ['score'] or ['classifier'], "
            "['embed_tokens', 'lm_head'] after resize_token_embeddings) so that save_pretrained writes them."
        )
    if kind == OUTPUTS_DIFFER and evidence.get("ties_lost"):
        return (
            "The model trained with its output head tied to its input embeddings, and its config says they are "
            "not tied: set model.config.tie_word_embeddings = True before save_pretrained (from_pretrained then "
            "ties them again), or, to train the head apart, untie it before training: "
            "model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach().clone()) with "
            "tie_word_embeddings=False (both tensors are then saved)."
        )
    if kind == OUTPUTS_DIFFER:
        return (
            "Save the model whose weights trained (the unwrapped model: accelerator.unwrap_model(model), "
            "model.module), with tied weights tied (save_pretrained keeps them), and reload with the same class."
        )
    if kind == MERGE_DRIFT:
        return (
            "Merge onto a base of the adapter's training dtype, not a quantized one: reload the base in "
            "float32/bfloat16 (no load_in_4bit/8bit), PeftModel.from_pretrained(base, adapter), then merge_and_unload()."
        )
    if kind == MERGE_ROUNDED:
        return (
            "Keep the merged model in float32: load the base with torch_dtype=torch.float32 before "
            "PeftModel.from_pretrained(base, adapter).merge_and_unload() and save it so (a 16-bit cast of the "
            "merged weights drops the change again); or serve base + adapter unmerged (PeftModel without "
            "merge_and_unload, or a server's LoRA support), where the adapter's output is added in the forward."
        )
    if kind == SHARDED:
        return (
            "Gather the full state dict before saving, on every rank, and save it on rank 0: "
            "torch.distributed.checkpoint.state_dict.get_model_state_dict(model, "
            "options=StateDictOptions(full_state_dict=True, cpu_offload=True)) under FSDP2 (fully_shard), "
            "FullStateDictConfig(offload_to_cpu=True, rank0_only=True) under FSDP1; "
            "or save the shards with torch.distributed.checkpoint (dcp.save) and load them with dcp.load."
        )
    if kind == RELOAD_FAILED and evidence.get("missing_arguments"):
        arguments = evidence["missing_arguments"]
        model = str(evidence.get("loader", "Module.")).split(".", 1)[0]
        passed = ", ".join(f"{a}=..." for a in arguments)
        return (
            f"Call self.save_hyperparameters() in {model}.__init__ so that the checkpoint records "
            f"{names(arguments, 3)}, or pass them when loading: {model}.load_from_checkpoint(path, {passed})."
        )
    if kind == RELOAD_FAILED and evidence.get("prefix_matches"):
        return fix({**evidence, "reason": PREFIX})
    if kind == RELOAD_FAILED:
        return (
            "Save what the loader needs: resized embeddings in modules_to_save (or save the whole model), "
            "and reload with the same model class and config."
        )
    if kind == NONFINITE:
        return (
            "Save in the training dtype (bfloat16 or float32): values beyond 65504 overflow float16 to inf."
        )
    if kind == EMPTY:
        return (
            "Gather the sharded parameters before saving: accelerator.get_state_dict(model) or "
            "FullStateDictConfig(offload_to_cpu=True, rank0_only=True) under FSDP; "
            "zero3_save_16bit_model / GatheredParameters under DeepSpeed ZeRO-3."
        )
    return "Save the tokenizer beside the model: tokenizer.save_pretrained(output_dir) (Trainer(processing_class=tokenizer) does it in save_model)."


def _keras_fix(evidence: Mapping[str, Any]) -> str | None:
    """The fix of a Keras save, in Keras's terms."""
    kind, missing = evidence.get("kind"), evidence.get("missing_class")
    if kind == RELOAD_FAILED and missing:
        return (
            f"Register {missing} so that keras.models.load_model can rebuild it: decorate the class with "
            "@keras.saving.register_keras_serializable() and import its module before loading (or pass "
            f"custom_objects={{{missing!r}: {missing}}} to load_model)."
        )
    if kind == RELOAD_FAILED:
        return (
            "Make the model rebuildable from its config: every custom layer and model registered with "
            "@keras.saving.register_keras_serializable(), its get_config() returning the arguments of "
            "its __init__, and its weights created in build()."
        )
    if kind == OUTPUTS_DIFFER:
        return (
            "A custom layer reloads with another config or other weights: make its get_config() return "
            "every argument of its __init__ (the ones left out are rebuilt with their defaults), and "
            "create its weights in build() so that the file restores them."
        )
    if kind == NONFINITE:
        return (
            "A float16 variable overflowed (beyond 65504) in training, e.g. BatchNormalization's "
            "moving_variance under the 'float16' dtype policy: train with "
            "keras.mixed_precision.set_global_policy('mixed_float16'), which keeps the variables in "
            "float32, or normalise the inputs."
        )
    return None


RULES: tuple[Rule, ...] = (
    observation_rule(SPEC, OBSERVATION, message, fix),
    observation_rule(SPEC, RELOAD_OBSERVATION, reload_message, reload_fix),
)
