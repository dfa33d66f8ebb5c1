"""TOR015 for loads with `strict=False`: real wrappers' state dicts, the intended partial loads.

One child under the boot module (as `trainmedic run` runs a script) runs every case of
`run_loads.py`: the example's DDP pre-training (gloo, world size 1) whose `state_dict()` carries
`module.`, a torch.compile'd module's `_orig_mod.` keys, a whole checkpoint passed for its model
entry, and the healthy loads (a backbone into a
model with a new head, parts loaded on purpose, a strict load). The explicit guard is checked in
this process with DataParallel's `module.` keys (a real wrapper that needs no process group).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import torch
import trainmedic.torch as tm
from torch import nn
from trainmedic.findings import Finding, Severity
from trainmedic.registry import run_rules
from trainmedic.rules.tor import tor015_saved_model_differs as tor015
from trainmedic.torch._loads import best_renaming

from ..helpers import InstrumentedRun, records_by_case, run_instrumented
from .conftest import SINGLE_THREAD

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src" / "trainmedic"
CASES = ["example", "example:fixed", "compiled", "whole-checkpoint", "new-head", "parts", "strict"]


@pytest.fixture(scope="module")
def child(tmp_path_factory: pytest.TempPathFactory) -> InstrumentedRun:
    tmp = tmp_path_factory.mktemp("loads")
    return run_instrumented(
        ["python", str(HERE / "run_loads.py"), *CASES], tmp, env=SINGLE_THREAD, timeout=180
    )


@pytest.fixture(scope="module")
def per_case(child: InstrumentedRun) -> dict[str, list[Finding]]:
    """The findings of each case, from the child's events cut at its markers."""
    assert child.result.returncode == 0, child.result.stderr[-3000:]
    assert f"trainmedic from {SRC}" in child.result.stdout, child.result.stdout
    return {case: run_rules(record) for case, record in records_by_case(child.record).items()}


def tor015_of(found: list[Finding]) -> Finding:
    (finding,) = [f for f in found if f.code == "TOR015"]
    return finding


def test_ddp_state_dict_into_the_plain_model_names_the_module_prefix(per_case) -> None:
    finding = tor015_of(per_case["example"])
    assert finding.severity is Severity.ERROR
    assert (finding.evidence["strip"], finding.evidence["add"]) == ("module.", "")
    assert finding.evidence["missing"] == finding.evidence["model_tensors"] == 4
    assert finding.evidence["where"].startswith("saved_model_differs.py:")
    assert "loaded 0 of the 4 parameters and buffers of MLP" in finding.message
    assert "consume_prefix_in_state_dict_if_present(state_dict, 'module.')" in finding.fix
    assert "model.module.state_dict()" in finding.fix


def test_the_fixed_example_saves_the_inner_model_and_loads_strictly(per_case) -> None:
    assert "TOR015" not in {f.code for f in per_case["example:fixed"]}


def test_compiled_module_state_dict_names_the_orig_mod_prefix(per_case) -> None:
    finding = tor015_of(per_case["compiled"])
    assert (finding.evidence["strip"], finding.evidence["prefix_matches"]) == ("_orig_mod.", 8)
    assert "model._orig_mod.state_dict()" in finding.fix


def test_a_whole_checkpoint_loaded_as_a_state_dict_names_its_model_entry(per_case) -> None:
    finding = tor015_of(per_case["whole-checkpoint"])
    assert finding.evidence["reason"] == tor015.MOSTLY_UNLOADED
    assert finding.evidence["nested"] == ["model"]  # the optimizer's state dict holds no tensor at its top
    assert "model.load_state_dict(checkpoint['model'])" in finding.fix


@pytest.mark.parametrize("case", ["new-head", "parts", "strict"])
def test_intended_loads_are_quiet(per_case, case: str) -> None:
    assert [f for f in per_case[case] if f.severity.at_least(Severity.WARNING)] == []


def test_explicit_guard_sees_a_dataparallel_state_dict() -> None:
    torch.manual_seed(0)
    saved = nn.DataParallel(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))).state_dict()
    with tm.guard() as guard:
        nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2)).load_state_dict(saved, strict=False)
    finding = tor015_of(guard.findings())
    assert finding.evidence["strip"] == "module."
    assert finding.evidence["where"] == f"{Path(__file__).name}:{_line_of('load_state_dict(saved')}"
    assert not hasattr(nn.Module.load_state_dict, "__wrapped__")  # restored when the guard stops


def _line_of(text: str) -> int:
    lines = Path(__file__).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line and "strict=False" in line)


# -- the pure parts: the renaming search and the judge ---------------------------------------------


def test_renaming_finds_a_prefix_to_strip_or_to_add() -> None:
    model = ["body.0.weight", "body.0.bias", "head.weight", "head.bias"]
    assert best_renaming(model, [f"module.{k}" for k in model]) == ("module.", "", 4)
    wrapped = [f"_orig_mod.{k}" for k in model]
    assert best_renaming(wrapped, model) == ("", "_orig_mod.", 4)
    assert best_renaming(wrapped, [f"module.{k}" for k in model]) == ("module.", "_orig_mod.", 4)
    assert best_renaming(["head.weight"], []) == ("", "", 0)


def judge(**kw: object) -> str | None:
    base: dict[str, object] = {"strip": "", "add": "", "prefix_matches": 0}
    return tor015.judge(**{**base, **kw})  # type: ignore[arg-type]


def test_judge_fires_on_a_prefix_or_on_names_that_do_not_meet() -> None:
    # a wrapper's prefix, even over part of the model
    assert (
        judge(
            model_tensors=100, state_dict_keys=100, missing=2, unexpected=2, strip="module.", prefix_matches=2
        )
        == tor015.PREFIX
    )
    # another prefix, most of the model unloaded: model.load_state_dict(backbone_sd) for model.backbone
    assert (
        judge(
            model_tensors=10, state_dict_keys=8, missing=10, unexpected=8, add="backbone.", prefix_matches=8
        )
        == tor015.PREFIX
    )
    # a whole checkpoint {"model": ..., "optimizer": ..., "epoch": 3} passed for its model entry
    assert judge(model_tensors=10, state_dict_keys=3, missing=10, unexpected=3) == tor015.MOSTLY_UNLOADED


def test_judge_is_quiet_on_intended_partial_loads() -> None:
    # a new head named differently from the old one (fc. -> head.): a minority of the model
    assert (
        judge(
            model_tensors=8,
            state_dict_keys=8,
            missing=2,
            unexpected=2,
            strip="fc.",
            add="head.",
            prefix_matches=2,
        )
        is None
    )
    # an adapter, or one shard of a sharded checkpoint: every key in the file is the model's
    assert judge(model_tensors=100, state_dict_keys=8, missing=92, unexpected=0) is None
    # a pretrained checkpoint whose own head is left unused, the new head missing
    assert judge(model_tensors=100, state_dict_keys=100, missing=2, unexpected=2) is None
