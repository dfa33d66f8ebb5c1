"""Loads with `strict=False` in ONE instrumented interpreter, as under `run` (TOR015).

Before each case it sends a marker event and gives the auto-installed monitor a fresh start
(as `run_examples.py` does), so a test can cut the events file into one record per case.
argv: CASE ... (see CASES); `example` and `example:fixed` run examples/torch/saved_model_differs.py.
"""

import contextlib
import io
import runpy
import sys
from pathlib import Path

from case_markers import run_each

import torch
from torch import nn

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "torch"


class Pretrained(nn.Module):
    """A backbone of three layers and a 10-class head, as a pretrained classifier is saved."""

    def __init__(self, classes=10):
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16)
        )
        self.fc = nn.Linear(16, classes)


class FineTuned(nn.Module):
    """The same backbone under a new 3-class head with another name."""

    def __init__(self):
        super().__init__()
        self.body = Pretrained().body
        self.head = nn.Linear(16, 3)


def example(fixed):
    main = runpy.run_path(str(EXAMPLES / "saved_model_differs.py"), run_name="example")["main"]
    with contextlib.redirect_stdout(io.StringIO()):
        main(fixed)


def compiled():
    """torch.compile'd module's state_dict(): keys under `_orig_mod.` (nothing is compiled to read it)."""
    saved = torch.compile(Pretrained()).state_dict()
    Pretrained().load_state_dict(saved, strict=False)


def whole_checkpoint():
    """A whole checkpoint passed for its model entry: nothing of the model is at the top level."""
    model = Pretrained()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 3}
    Pretrained().load_state_dict(checkpoint, strict=False)


def new_head():
    """The pretrained file, head included, into the model with a new head (timm/torchvision style)."""
    FineTuned().load_state_dict(Pretrained().state_dict(), strict=False)


def parts():
    """Parts loaded on purpose: the backbone alone, then a checkpoint in two shards."""
    model = FineTuned()
    model.load_state_dict(
        {k: v for k, v in Pretrained().state_dict().items() if k.startswith("body.")}, strict=False
    )
    state = FineTuned().state_dict()
    keys = list(state)
    for shard in (keys[: len(keys) // 2], keys[len(keys) // 2 :]):
        model.load_state_dict({k: state[k] for k in shard}, strict=False)


def strict():
    Pretrained().load_state_dict(Pretrained().state_dict())


CASES = {
    "example": lambda: example(False),
    "example:fixed": lambda: example(True),
    "compiled": compiled,
    "whole-checkpoint": whole_checkpoint,
    "new-head": new_head,
    "parts": parts,
    "strict": strict,
}


def main(cases):
    sys.path.insert(0, str(EXAMPLES))
    run_each(CASES, cases)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(sys.argv[1:])
