"""What the Keras save checks' worker found (`trainmedic.keras._save_worker`), observed for TOR015.

The worker measures and judges nothing; here one save's result becomes the `saved_reload_differs`
observation `tor015_saved_model_differs` words, with the file, the line that saved, how it was
reloaded and what differed as evidence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmedic.events import GuardObservation
from trainmedic.rules.tor import tor015_saved_model_differs as tor015

LOADERS = {
    "keras-model": "keras.models.load_model",
    "keras-weights": "load_weights into the architecture rebuilt from model.to_json()",
}
TENSOR_KEYS = ("total", "empty", "empty_examples", "nonfinite", "nonfinite_examples", "files")


def observations(saved: str, path: str, where: str, result: Mapping[str, Any]) -> list[GuardObservation]:
    """What one save's result shows (none when the file is gone or was overwritten before the
    worker read it, or could not be rebuilt there for reasons not the save's)."""
    if result.get("gone") or result.get("superseded") or result.get("skipped"):
        return []
    base = {"path": path, "where": where, "saved": saved, "loader": LOADERS[saved]}
    tensors = result.get("tensors") or {}
    if int(tensors.get("nonfinite", 0)) or int(tensors.get("empty", 0)):
        kind = tor015.NONFINITE if int(tensors.get("nonfinite", 0)) else tor015.EMPTY
        return [_observed({**base, "kind": kind, **{k: tensors.get(k) for k in TENSOR_KEYS}})]
    if result.get("reload_error"):
        evidence = {**base, "kind": tor015.RELOAD_FAILED, "error": result["reload_error"]}
        if result.get("missing_class"):
            evidence["missing_class"] = result["missing_class"]
        return [_observed(evidence)]
    if "max_abs_diff" in result:
        measure = {k: float(result[k]) for k in ("max_abs_diff", "output_scale", "argmax_agree")}
        dtype = str(result.get("dtype") or "float32")
        if tor015.judge_outputs(dtype=dtype, **measure) is not None:
            evidence = {**base, "kind": tor015.OUTPUTS_DIFFER, "dtype": dtype, "probe": result.get("probe")}
            return [_observed({**evidence, **measure})]
    return []


def _observed(evidence: dict[str, Any]) -> GuardObservation:
    return GuardObservation(check=tor015.RELOAD_OBSERVATION, data=evidence)
