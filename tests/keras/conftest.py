"""Keras lines under test, and the environment that selects each one in a child process."""

from __future__ import annotations

# Each Keras line users run today, selected the way users select it.
LINES: dict[str, dict[str, str]] = {
    "keras3-tensorflow": {"KERAS_BACKEND": "tensorflow"},
    "keras3-torch": {"KERAS_BACKEND": "torch"},
    "tf-keras": {"TF_USE_LEGACY_KERAS": "1"},
}
QUIET = {"TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}


def line_env(line: str) -> dict[str, str]:
    env = {**QUIET, **LINES[line]}
    if line != "tf-keras":
        env["TF_USE_LEGACY_KERAS"] = "0"
    return env
