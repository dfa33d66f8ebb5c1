"""Wording shared by TOR015's two collectors (`trainmedic.rules.tor.tor015_saved_model_differs`):
the renaming that maps a file's keys onto a model's, and the details of a save that did not
reload as it was (its keys, its tied weights, a merge's effect, its shards)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmedic.rules._helpers.guard import names


def renaming(evidence: Mapping[str, Any]) -> str:
    strip, add = evidence.get("strip") or "", evidence.get("add") or ""
    if strip and add:
        return f"the checkpoint's keys start with {strip!r} where the model's start with {add!r}"
    if strip:
        return f"the checkpoint's keys start with {strip!r} and the model's do not"
    return f"the model's keys start with {add!r} and the checkpoint's do not"


def keys_text(evidence: Mapping[str, Any]) -> str:
    """Why a strict load refused the file (a reload in the training process): the keys and the
    prefix that maps them, or the arguments a Lightning module's `__init__` was not given."""
    arguments = evidence.get("missing_arguments")
    if arguments:
        return (
            f"; the checkpoint's hyperparameters lack {names([f'`{a}`' for a in arguments], 3)}, "
            "which its __init__ requires"
        )
    if not evidence.get("missing") and not evidence.get("unexpected"):
        return ""
    text = (
        f"; {evidence.get('unexpected')} of the file's {evidence.get('state_dict_keys')} keys are not "
        f"the model's and {evidence.get('missing')} of its {evidence.get('model_tensors')} are not in the file"
    )
    if evidence.get("prefix_matches"):
        text += f": {renaming(evidence)} ({evidence.get('prefix_matches')} keys differ only by it)"
    return (
        f"{text} (not in the file: {names(evidence.get('missing_examples'), 3)}; "
        f"not the model's: {names(evidence.get('unexpected_examples'), 3)})"
    )


def ties_text(evidence: Mapping[str, Any]) -> str:
    """Tied weights the reload did not tie again (or tied where memory had them apart): the
    save writes a tied tensor once, under one name, and `from_pretrained` ties the other name to
    it only when the saved config says `tie_word_embeddings=True`; else that name is missing from
    the files and initialized at random."""

    def quoted(items: list[str], limit: int) -> str:
        return names([f"`{n}`" for n in items], limit)

    text = ""
    for group in evidence.get("ties_lost") or []:
        unsaved = [n for n in group if n in (evidence.get("not_saved") or [])]
        kept = [n for n in group if n not in unsaved]
        text += f"; {quoted(group, 3)} were one tensor in memory (tied)"
        if unsaved and kept:
            text += (
                f": the save wrote it once, as {quoted(kept, 2)}, and the reload did not tie "
                f"{quoted(unsaved, 2)} to it again (tie_word_embeddings={evidence.get('tie_word_embeddings')} "
                f"in the saved config): {quoted(unsaved, 2)} was initialized at random"
            )
        else:
            text += ", and are apart in the reloaded model"
    for group in evidence.get("ties_added") or []:
        text += f"; {quoted(group, 3)} were apart in memory and are one tensor (tied) in the reloaded model"
    return text


def effect_text(evidence: Mapping[str, Any]) -> str:
    """The probe's outputs, when measured: the adapter's own effect and the merge's drift."""
    if evidence.get("adapter_effect") is None:
        return ""
    return (
        f"; on a probe the adapter moves the outputs by up to {evidence['adapter_effect']:.3g} and the merged "
        f"model differs from the adapter model by up to {evidence.get('max_abs_diff', 0):.3g} "
        f"(largest output {evidence.get('output_scale', 0):.3g})"
    )


def shapes_text(evidence: Mapping[str, Any]) -> str:
    shapes = evidence.get("shapes") or {}
    return "; ".join(
        f"{name} {local} of {whole}" for name, (local, whole) in list(shapes.items())[:2]
    ) or names(evidence.get("sharded_examples"), 3)
