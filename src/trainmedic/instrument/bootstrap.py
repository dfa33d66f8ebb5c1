"""What the boot `sitecustomize` runs in every Python process of a supervised tree.

1. Announce the process (pid, ppid, argv, rank, interpreter) so the supervisor knows the
   real trainers for certain, not by guessing from command lines.
2. Register post-import hooks so a framework is instrumented only when the
   user's code imports it.

Failures here are reported on stderr as one line and never stop the user's
program.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import ModuleType

from trainmedic.events import ProcessSpawn
from trainmedic.instrument import channel, hooks

# framework module -> "trainmedic module:function" that instruments it. Each integration keeps
# its installer in its own package; they are named by string so that booting imports none of
# them (nor, through them, a framework) before the user's code imports that framework.
FRAMEWORK_HOOKS: dict[str, str] = {
    "keras": "trainmedic.keras._auto:install",
    "tf_keras": "trainmedic.keras._auto:install",
    "torch": "trainmedic.torch._auto:install",
    "lightning": "trainmedic.lightning._auto:install",
    "pytorch_lightning": "trainmedic.lightning._auto:install",
    # transformers imports its Trainer lazily: the patch waits for the Trainer's own module.
    "transformers.trainer": "trainmedic.hf:install",
    # the fine-tuning watches on every language model the torch guard meets, and the rows
    # `resize_token_embeddings` adds (TOR014)
    "transformers.modeling_utils": "trainmedic.llm:install",
    # fine-tuning: the chat template renders that serve a model, TRL's truncation at max_length
    "transformers.tokenization_utils_base": "trainmedic.llm.templates:install",
    "trl.trainer.sft_trainer": "trainmedic.llm.sft:install",
    # DPO: the setup and the pairs DPOTrainer builds (TRN014, DAT018, DAT020)
    "trl.trainer.dpo_trainer": "trainmedic.llm.preference:install",
    # Accelerate's `load_state` is a resume (TOR017): what it restored, and what it could not
    "accelerate.accelerator": "trainmedic.torch._accelerate:install",
    "sklearn.model_selection": "trainmedic.sklearn:install",
    "xgboost": "trainmedic.xgboost:install",
    "lightgbm": "trainmedic.lightgbm:install",
    "catboost": "trainmedic.catboost:install",
    "ray.train": "trainmedic.ray:install",
    # JAX: the guard on every optax transformation and Flax optimizer, the scalars JAX programs
    # write (`jax._auto`)
    "optax": "trainmedic.jax._auto:install_optax",
    "flax.training.train_state": "trainmedic.jax._auto:install_train_state",
    "flax.nnx.training.optimizer": "trainmedic.jax._auto:install_nnx_optimizer",
    "flax.metrics.tensorboard": "trainmedic.jax._auto:install_flax_tensorboard",
    "clu.metric_writers": "trainmedic.jax._auto:install_clu",
    "tensorboardX": "trainmedic.jax._auto:install_tensorboardx",
    "pyspark.ml": "trainmedic.spark._mllib:install",
    # experiment trackers: which run the script opened, so the diagnosis can be attached to it
    "mlflow": "trainmedic.trackers.inprocess:install_mlflow",
    "wandb": "trainmedic.trackers.inprocess:install_wandb",
}

_started = False


def _argv() -> list[str]:
    """The full command line: /proc where it exists (sys.argv is incomplete this early)."""
    try:
        raw = Path(f"/proc/{os.getpid()}/cmdline").read_bytes()
        return [part.decode(errors="replace") for part in raw.split(b"\0") if part]
    except OSError:
        return [sys.executable, *getattr(sys, "argv", [])]


def _installer(target: str) -> hooks.Callback:
    """A callback that imports the installer named by `target` only when its framework loads.

    No lookup happens here: finding `trainmedic.torch._auto` would import `trainmedic.torch`,
    hence torch itself, in every process at boot.
    """
    module_name, _, func_name = target.partition(":")

    def install(module: ModuleType) -> None:
        installer = getattr(importlib.import_module(module_name), func_name)
        installer(module)

    return install


def start() -> None:
    """Announce this process and arm the framework hooks (idempotent)."""
    global _started
    if _started or not channel.is_supervised():
        return
    _started = True
    argv = _argv()
    announce = ProcessSpawn(
        ppid=os.getppid(), cmdline=argv, role="python", source="announce", executable=sys.executable
    )
    channel.emit(announce)
    if any("ipykernel" in arg for arg in argv[1:4]):  # a notebook kernel: record its cells
        from trainmedic.notebook import boot as notebook_boot

        if notebook_boot.is_kernel(argv):
            notebook_boot.arm()
    for framework, target in FRAMEWORK_HOOKS.items():
        hooks.when_imported(framework, _installer(target))
