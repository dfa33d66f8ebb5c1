"""PyTorch test helpers: examples, the environment of their child processes."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "torch"

# 2 shared cores: torch's thread pools spinning against other processes make a tiny step 50x
# slower. One thread per process, in children and here.
SINGLE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
os.environ.update(SINGLE_THREAD)

# example -> the codes it must yield (at any severity); its --fixed form must yield none of them.
EXPECTED: dict[str, set[str]] = {
    "nonfinite_loss": {"TRN001"},
    "frozen_parameters": {"TOR001"},
    "eval_mode_training": {"TOR002"},
    "grads_not_zeroed": {"TOR003"},
    "softmax_into_crossentropy": {"TOR004"},
    "sampler_epoch_not_set": {"TOR005"},
    "scheduler_before_optimizer": {"TOR006"},
    "decay_on_norm_bias": {"TOR007"},
    "unseeded_run": {"TOR008"},
    "single_class_cross_entropy": {"TOR009"},
    "input_bound": {"TRN005"},
    "exploding_gradients": {"TRN007"},
    "vanishing_gradients": {"TRN008"},
    "clipping_saturated": {"TRN010"},
    "optimizer_steps_skipped": {"TRN011"},
    "zero_learning_rate": {"TRN012"},
    "updates_below_precision": {"TRN013"},
}
