"""The save checks (`trainmedic.torch._saves`): what a script saved, reloaded in a separate
process as a user loads it, against the model in memory: TOR015 `saved-model-differs` and TOR016
`adapter-saved-empty` on real PEFT/transformers saves of tinylm, each failure beside its healthy
twin in the same run.

One child under the boot module (as `trainmedic run` runs a script) runs `run_saves.py`: a
LoRA classifier whose head is outside the adapter (the head reloads at random) and its twin with
`modules_to_save=["score"]`; an adapter saved before training; a chat-trained model saved
without its tokenizer, and with it; an adapter trained on the moment its save returned; a
float32 merge_and_unload; a plain `torch.save` of a state dict; a causal LM trained with tied
embeddings whose config flag was turned off (saved once, reloaded untied: a random head), and
its twin that keeps the flag; and a SYNTHETIC adapter file
with empty tensors, as a ZeRO-3/FSDP save without gathering writes it (neither runs on a
CPU-only machine: the file is written by hand).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from trainmedic.events import GuardObservation
from trainmedic.findings import Finding
from trainmedic.record import RunRecord
from trainmedic.registry import run_rules
from trainmedic.rules.tor import tor015_saved_model_differs as tor015
from trainmedic.rules.tor import tor016_adapter_saved_empty as tor016
from trainmedic.torch import _save_probe as save_probe

from ..helpers import InstrumentedRun, run_instrumented

pytest.importorskip("peft")

HERE = Path(__file__).resolve().parent
CHECKS = {tor015.RELOAD_OBSERVATION, tor016.OBSERVATION}


@pytest.fixture(scope="module")
def child(tmp_path_factory: pytest.TempPathFactory, tinylm_dir: Path) -> tuple[InstrumentedRun, Path]:
    tmp = tmp_path_factory.mktemp("saves")
    out = tmp / "out"
    run = run_instrumented(
        ["python", str(HERE / "run_saves.py"), str(tinylm_dir), str(out)],
        tmp,
        env={"OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"},
        timeout=400,
    )
    assert run.result.returncode == 0, run.result.stderr[-3000:]
    return run, out


@pytest.fixture(scope="module")
def by_path(child: tuple[InstrumentedRun, Path]) -> dict[str, list[GuardObservation]]:
    """The save checks' observations, by the name of the path they are about."""
    run, _ = child
    found: dict[str, list[GuardObservation]] = {}
    for event in run.record.events:
        if isinstance(event, GuardObservation) and event.check in CHECKS:
            found.setdefault(Path(event.data["path"]).name, []).append(event)
    return found


@pytest.fixture(scope="module")
def findings(child: tuple[InstrumentedRun, Path]) -> dict[str, Finding]:
    return {
        f.code: f for f in run_rules(RunRecord.of(child[0].record.events)) if f.code in ("TOR015", "TOR016")
    }


def only(observations: list[GuardObservation]) -> dict[str, Any]:
    (observation,) = observations
    return observation.data


def test_a_head_outside_modules_to_save_reloads_at_random(by_path, findings) -> None:
    data = only(by_path["head-lost"])
    assert (data["kind"], data["saved"]) == (tor015.OUTPUTS_DIFFER, "peft")
    assert data["max_abs_diff"] > tor015.OUTPUT_TOLERANCE["float32"] * data["output_scale"]
    assert data["where"].startswith("run_saves.py:")
    # the probe: the first row of the batch the classifier trained on (a checked step's)
    assert data["probe"].startswith("a row of the run's batch at step ")
    message = tor015.reload_message(data)  # the finding words its first observation: the merge's
    assert "head-lost" in message
    assert "reloaded with its framework's loader, answers a probe (a row of the run's batch" in message
    assert "modules_to_save" in (tor015.reload_fix(data) or "")


def test_tied_embeddings_saved_once_and_reloaded_apart(by_path) -> None:
    # tied in memory, tie_word_embeddings=False in the config: the save writes the tensor once, as
    # the embedding, and the reload initializes lm_head.weight at random
    data = only(by_path["untied-by-config"])
    assert (data["kind"], data["saved"]) == (tor015.OUTPUTS_DIFFER, "transformers")
    assert data["max_abs_diff"] > tor015.OUTPUT_TOLERANCE["float32"] * data["output_scale"]
    assert data["ties_lost"] == [["lm_head.weight", "model.embed_tokens.weight"]]
    assert (data["not_saved"], data["ties_added"]) == (["lm_head.weight"], [])
    assert data["tie_word_embeddings"] is False
    message = tor015.reload_message(data)
    assert "as `model.embed_tokens.weight`" in message
    assert "`lm_head.weight` was initialized at random" in message
    assert "tie_word_embeddings = True" in (tor015.reload_fix(data) or "")


def test_healthy_saves_reload_as_they_were(by_path) -> None:
    # the head in modules_to_save, a plain state dict, a chat model saved with its tokenizer, a
    # merge, a model trained on the moment its save returned, a model trained with tied embeddings
    for quiet in ("head-saved", "mlp.pt", "with-tokenizer", "trained-on", "dpo-rate", "tied"):
        assert quiet not in by_path, by_path.get(quiet)
    assert not [o for obs in by_path.values() for o in obs if o.data.get("kind") == tor015.MERGE_DRIFT]


def test_a_merge_onto_a_bfloat16_base_rounds_a_small_adapter_away(by_path, findings) -> None:
    # Three merges in run_saves.py's loop, one line: the DPO-rate adapter onto bfloat16 (lost),
    # onto float32 (quiet), the fast-trained adapter onto bfloat16 (quiet: a few % rounded).
    (merge,) = [o for o in by_path.get("", []) if o.data["kind"] == tor015.MERGE_ROUNDED]
    data = merge.data
    line = next(
        i for i, text in enumerate((HERE / "run_saves.py").read_text().splitlines(), 1) if "# merge:" in text
    )
    assert data["where"] == f"run_saves.py:{line}"
    assert (data["merged_dtype"], data["layers"]) == ("bfloat16", 4)
    assert data["weight_lost"] > tor015.MERGE_LOST_SHARE
    # the probe: the merged model's outputs stay within bfloat16's rounding of the adapter model's
    assert data["max_abs_diff"] <= tor015.HALF_TOLERANCE * data["output_scale"]
    assert data["adapter_effect"] > 0
    finding = findings["TOR015"]  # observed at the merge, before the saves' checks end
    assert "lost to rounding" in finding.message
    assert "float32" in (finding.fix or "")


def test_the_probe_runs_after_the_script_on_the_model_as_saved(child, by_path) -> None:
    run, _ = child
    # The script's forward hook: no forward in the save call nor while the script trains on (the
    # probe runs on the copy made at the save, when the script has ended: the large step taken
    # right after the save changed every adapter weight, and "trained-on" is quiet).
    assert "forwards in the save call: 0" in run.result.stdout
    assert "forwards of the copy while the script ran: 0" in run.result.stdout
    assert "trained-on" not in by_path


def test_a_model_saved_before_any_forward_is_probed_with_random_token_ids(child) -> None:
    run, _ = child
    scratch = run.events_path.parent / "save-checks"
    probes = {
        Path(s["path"]).name: s.get("probe")
        for s in map(json.loads, map(Path.read_text, scratch.glob("*/*/job.json")))
    }
    assert probes["before-training"] == save_probe.RANDOM  # saved before its first forward
    assert probes["head-saved"].startswith("a row of the run's batch at step ")


def test_an_adapter_saved_before_training_is_untrained(by_path, findings) -> None:
    data = only(by_path["before-training"])
    assert data["reason"] == tor016.UNTRAINED
    assert data["lora_b"] == data["lora_b_zero"] == 4
    assert data["trained_steps"] > data["saved_at_step"]
    assert "lora_B matrices exactly zero" in findings["TOR016"].message


def test_an_adapter_written_without_gathering_is_empty(by_path) -> None:
    data = only(by_path["zero3-adapter.pt"])  # SYNTHETIC file, see the module's docstring
    assert data["reason"] == tor016.EMPTY
    assert data["empty"] == data["total"] == 8


def test_a_chat_model_saved_without_its_tokenizer(by_path) -> None:
    assert only(by_path["no-tokenizer"])["kind"] == tor015.TOKENIZER_MISSING
    # saved before any chat template was rendered: nothing to ask of them
    assert "head-lost" in by_path
    assert all(o.data.get("kind") != tor015.TOKENIZER_MISSING for o in by_path["head-lost"])


def test_scratch_stays_out_of_the_users_folder(child) -> None:
    _, out = child
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [
            "before-training",
            "dpo-rate",
            "head-lost",
            "head-saved",
            "mlp.pt",
            "no-tokenizer",
            "tied",
            "trained-on",
            "untied-by-config",
            "with-tokenizer",
            "zero3-adapter.pt",
        ]
    )


# -- the pure parts ---------------------------------------------------------------------------------


def test_output_tolerance_is_rounding_not_a_lost_tensor() -> None:
    def judge(dtype: str, diff: float) -> str | None:
        return tor015.judge_outputs(dtype=dtype, max_abs_diff=diff, output_scale=10.0, argmax_agree=1.0)

    assert judge("float32", 0.001) is None  # TF32 rounding on a GPU
    assert judge("float32", 1.0) == tor015.OUTPUTS_DIFFER
    assert judge("bfloat16", 0.2) is None
    assert judge("bfloat16", 2.0) == tor015.OUTPUTS_DIFFER
    assert judge("float32", float("nan")) == tor015.OUTPUTS_DIFFER


def test_merge_judge_is_half_the_adapters_change() -> None:
    assert tor015.judge_merge(weight_lost=1e-6) is None  # a float32 merge
    assert tor015.judge_merge(weight_lost=0.05) is None  # a 16-bit merge of an adapter that trained
    assert tor015.judge_merge(weight_lost=0.9) == tor015.MERGE_ROUNDED
    assert tor015.judge_merge(weight_lost=float("nan")) == tor015.MERGE_ROUNDED


def test_ties_lost_and_added(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    import torch
    from torch import nn
    from trainmedic.torch._save_worker import tie_changes, tied_groups

    tied, apart = (
        nn.Sequential(nn.Embedding(4, 2), nn.Linear(2, 4)),
        nn.Sequential(nn.Embedding(4, 2), nn.Linear(2, 4)),
    )
    tied[1].weight = tied[0].weight  # an LM head that is its input embedding, as tie_weights() does
    assert tied_groups(tied) == [["0.weight", "1.weight"]]
    assert tied_groups(apart) == []
    assert tie_changes(tied_groups(tied), tied_groups(tied), tied, tmp_path) == {}
    save_file({"0.weight": torch.zeros(4, 2)}, str(tmp_path / "model.safetensors"))  # saved once
    lost = tie_changes(tied_groups(tied), [], apart, tmp_path)
    assert (lost["ties_lost"], lost["not_saved"], lost["ties_added"]) == (
        [["0.weight", "1.weight"]],
        ["1.weight"],
        [],
    )
    added = tie_changes([], tied_groups(tied), tied, tmp_path)
    assert (added["ties_lost"], added["ties_added"]) == ([], [["0.weight", "1.weight"]])


def test_tor016_judge() -> None:
    assert tor016.judge(adapter=True, empty=3, lora_b=0, lora_b_zero=0, trained_steps=0) == tor016.EMPTY
    assert tor016.judge(adapter=True, empty=0, lora_b=4, lora_b_zero=4, trained_steps=10) == tor016.UNTRAINED
    # nothing trained yet (a conversion script), or one B matrix moved: not untrained
    assert tor016.judge(adapter=True, empty=0, lora_b=4, lora_b_zero=4, trained_steps=0) is None
    assert tor016.judge(adapter=True, empty=0, lora_b=4, lora_b_zero=3, trained_steps=10) is None
    assert tor016.judge(adapter=False, empty=3, lora_b=0, lora_b_zero=0, trained_steps=10) is None
