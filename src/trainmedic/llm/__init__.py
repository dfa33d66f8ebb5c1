"""The fine-tuning watches: what goes wrong silently when a language model is fine-tuned.

Collectors only (they measure and observe; the findings' files in `rules/` decide):
- `batches`: the labels the model is trained on (supervised tokens, EOS, the shift);
- `params`: adapters (LoRA...) that never learn, token rows added by a resize that never change;
- `templates`: the chat template of the training text against the one used at inference,
  and what truncation at `max_length` cuts (TRL's `SFTTrainer`);
- `rl`: what TRL's `GRPOTrainer` and `RLOOTrainer` log (reward groups, KL, lengths), copied
  by the HF guard's `on_log`.

They attach to a model the PyTorch guard meets: a Hugging Face `PreTrainedModel`, or any model
wrapped by PEFT. The guard does not import this package: `install` (hooked on
`transformers.modeling_utils` by the boot module and by `trainmedic.hf`) registers `attach` as
a model watch through the guard's watcher protocol (`trainmedic.torch._watchers`), and the HF
Trainer callback calls `attach` itself with the Trainer's tokenizer. Importing this package
imports no framework; each part imports what it needs when it attaches.
"""

from __future__ import annotations

import weakref
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainmedic.torch._interface import MonitorLike

# The classes whose subclasses are the models these watches understand, by name: checking
# a model's MRO by name needs neither transformers nor peft imported.
_MODEL_BASES = frozenset({"PreTrainedModel", "PeftModel", "PeftMixedModel"})
_attached: weakref.WeakKeyDictionary[Any, set[int]] = weakref.WeakKeyDictionary()


def is_language_model(model: Any) -> bool:
    """A transformers model, or a model wrapped by PEFT (a user's own module included)."""
    return any(cls.__name__ in _MODEL_BASES for cls in type(model).__mro__)


def attach(model: Any, monitor: MonitorLike, *, tokenizer: Any = None) -> None:
    """Start the fine-tuning watches on `model` for `monitor` (once per model and monitor)."""
    if not is_language_model(model):
        return
    monitors = _attached.setdefault(model, set())
    if id(monitor) in monitors:
        return
    monitors.add(id(monitor))
    from trainmedic.llm import batches, params, sft, templates

    for part in (batches, params, templates):
        part.attach(model, monitor, tokenizer=tokenizer)
    sft.deliver(monitor)


def install(module: ModuleType) -> None:
    """On `transformers.modeling_utils`: every root model the PyTorch guard meets goes to
    `attach` (a model can be a language model only once this module is loaded), and
    `resize_token_embeddings` learns the rows it adds (`params`, TOR014)."""
    from trainmedic.llm import params
    from trainmedic.torch import _watchers

    _watchers.on_model(attach)
    params.install(module)
