"""TRL's DPOTrainer at chance (TRN014) and the pairs it builds (DAT018, DAT020), from the guard.

Real DPOTrainer runs of 8 steps on the tiny offline model, each guarded by
`trainmedic.hf.Guard` (what `trainmedic run` adds to every Trainer): the pairs' chosen equal
to their rejected, `beta` 0, a reference model that shares the policy's tensors (TRL refuses
`ref_model=model` itself, not a shallow copy), prompts rendered with a template that writes
BOS, and the healthy twin, whose loss starts at ln 2 at its first step and leaves it. Each
scenario runs once per module; the tests read its findings.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import load_tinylm
from trainmedic.findings import Finding

trl = pytest.importorskip("trl")
# TRL 1.16's DPOConfig sets transformers' deprecated names itself
pytestmark = [
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]

STEPS = 8
#: scenario -> (its findings by code, TRL's training logs)
Runs = dict[str, tuple[dict[str, Finding], list[dict[str, Any]]]]
SCENARIOS = ("healthy", "identical", "beta0", "shared_reference", "double_bos")


def _dpo(model_dir: Path, out: Path, scenario: str) -> tuple[list[Finding], list[dict[str, Any]]]:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import torch
    import trainmedic.hf

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.pad_token = "<|endoftext|>"
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    rows = load_tinylm().preferences(32)
    config: dict[str, Any] = {}
    ref_model = None
    if scenario == "identical":  # a join that wrote the chosen answer into `rejected`
        rows = [{**r, "rejected": r["chosen"]} for r in rows]
    elif scenario == "beta0":  # and pairs whose chosen is the longer in ~95 % of them (DAT019)
        config["beta"] = 0.0
        rows = load_tinylm().preferences(32, chosen_longer=0.95)
    elif scenario == "shared_reference":
        ref_model = copy.copy(model)  # a new object holding the policy's own tensors
    elif scenario == "double_bos":  # prompts rendered with the template, as strings
        rows = [
            {
                **r,
                "prompt": tokenizer.apply_chat_template(
                    [{"role": "user", "content": r["prompt"]}], tokenize=False, add_generation_prompt=True
                ),
            }
            for r in rows
        ]
    args = trl.DPOConfig(
        output_dir=str(out),
        max_steps=STEPS,
        per_device_train_batch_size=4,
        logging_steps=1,
        learning_rate=5e-4,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        bf16=False,
        disable_tqdm=True,
        **config,
    )
    guard = trainmedic.hf.Guard()
    trainer = trl.DPOTrainer(
        model=model,
        ref_model=ref_model,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        callbacks=[guard],
    )
    trainer.train()
    return guard.findings(), [h for h in trainer.state.log_history if "loss" in h]


@pytest.fixture(scope="module")
def runs(tinylm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Runs:
    from transformers import AutoModelForCausalLM

    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    bos_model = tmp_path_factory.mktemp("tinylm-bos-model")
    tokenizer = load_tinylm().make_bos_tokenizer(bos_model)  # the same vocabulary and a BOS
    model = AutoModelForCausalLM.from_pretrained(tinylm_dir)
    model.resize_token_embeddings(len(tokenizer), mean_resizing=False)  # a row for the BOS
    model.save_pretrained(bos_model)  # TRL loads the reference from the same folder
    done: Runs = {}
    try:
        for scenario in SCENARIOS:
            model_dir = bos_model if scenario == "double_bos" else tinylm_dir
            found, logs = _dpo(model_dir, tmp_path_factory.mktemp(scenario), scenario)
            done[scenario] = ({f.code: f for f in found}, logs)
    finally:
        torch.set_num_threads(threads)
    return done


def test_a_healthy_dpo_run_starts_at_ln2_leaves_it_and_stays_quiet(runs: Runs) -> None:
    found, logs = runs["healthy"]
    assert logs[0]["loss"] == pytest.approx(math.log(2), abs=1e-4)  # policy == reference at step 1
    assert max(h["rewards/margins"] for h in logs) > 0.05  # then it separates the pairs
    assert min(h["loss"] for h in logs) < 0.65
    assert not {"TRN014", "TRN003", "DAT018", "DAT019", "DAT020"} & set(found), [
        f.message for f in found.values()
    ]


def test_identical_pairs_put_dpo_at_chance_and_are_named(runs: Runs) -> None:
    found, logs = runs["identical"]
    assert all(h["loss"] == pytest.approx(math.log(2), abs=1e-4) for h in logs)
    assert all(h["rewards/margins"] == 0 for h in logs)  # what TRL prints: 0.6931 and 0.0
    finding = found["TRN014"]
    assert finding.evidence["cause"] == "identical_pairs"
    assert finding.evidence["identical_pairs"] == finding.evidence["pairs_checked"] > 0
    assert "identical in" in finding.message
    assert "ln 2 = 0.6931" in finding.message
    assert "TRN003" not in found  # one cause, one finding: no classifier's "chance ln 2"
    assert found["DAT018"].evidence["fraction"] == 1.0
    assert "steps 1, 2" in found["DAT018"].message


def test_beta_zero_puts_dpo_at_chance_and_is_named(runs: Runs) -> None:
    found, logs = runs["beta0"]
    assert all(h["rewards/chosen"] == 0 and h["rewards/rejected"] == 0 for h in logs)
    finding = found["TRN014"]
    assert finding.evidence["cause"] == "beta_zero"
    assert "beta" in finding.fix
    bias = found["DAT019"]  # the same judge as `check data`, on the token lengths of TRL's batches
    assert bias.evidence["length_unit"] == "tokens"
    assert bias.evidence["chosen_longer_share"] >= 0.8
    assert not {"DAT018", "TRN003"} & set(found)


def test_a_reference_that_shares_the_policy_puts_dpo_at_chance(runs: Runs) -> None:
    found, _ = runs["shared_reference"]
    finding = found["TRN014"]
    assert finding.evidence["cause"] == "reference_is_policy"
    assert finding.evidence["shared_parameters"] > 0
    assert "ref_model=None" in finding.fix
    assert "TRN003" not in found


def test_prompts_rendered_with_bos_give_double_bos_from_the_guard(runs: Runs) -> None:
    found, logs = runs["double_bos"]
    assert max(h["rewards/margins"] for h in logs) > 0.05  # the pairs differ: it learns, no TRN014
    assert "TRN014" not in found
    bos = found["DAT020"]
    assert bos.evidence["fraction"] == 1.0
    assert bos.evidence["served_bos_tokens"] == 1
    assert "<|begin_of_text|>" in bos.message


# -- the rule alone, on the events the guard sends (no TRL run) ---------------------------------


def _points(margins: list[float], *, loss: float | None = None, beta: float = 0.1) -> list[Any]:
    """A DPO run's logs, one per 10 steps: each margin with the sigmoid loss it gives."""
    from trainmedic.events import GuardObservation
    from trainmedic.rules.trn import trn014_preference_at_chance as trn014

    events: list[Any] = [
        GuardObservation(
            t=0.0,
            pid=1,
            check=trn014.SETUP_OBSERVATION,
            data={"trainer": "DPOTrainer", "beta": beta, "loss_type": ["sigmoid"], "reference": "separate"},
            step=1,
        )
    ]
    for i, m in enumerate(margins):
        value = loss if loss is not None else math.log1p(math.exp(-m))
        data = {"loss": round(value, 4), "margins": m, "chosen": m / 2, "rejected": -m / 2, "accuracies": 0.5}
        events.append(
            GuardObservation(
                t=float(i + 1), pid=1, check=trn014.LOG_OBSERVATION, data=data, step=10 * (i + 1)
            )
        )
    return events


def _codes(events: list[Any]) -> set[str]:
    from trainmedic.record import RunRecord
    from trainmedic.registry import run_rules

    return {f.code for f in run_rules(RunRecord.of(events))}


def test_a_slow_healthy_run_whose_margins_grow_past_noise_is_quiet() -> None:
    # lr 5e-7-like: the margin grows by a few thousandths a log; the loss hardly moves from ln 2
    assert "TRN014" not in _codes(_points([0.0005, 0.001, 0.002, 0.004, 0.006, 0.009]))
    assert "TRN014" in _codes(_points([0.0, 1e-6, -1e-6, 0.0, 2e-6, 0.0]))
    assert "TRN014" not in _codes(_points([0.0, 0.0, 0.0, 0.0]))  # 4 logs: too short to judge


def test_trn003_steps_aside_for_trn014_on_a_long_dpo_run_at_ln2() -> None:
    from trainmedic.events import Step

    steps = [Step(t=float(s), pid=1, step=s, metrics={"loss": 0.6931}) for s in range(10, 401, 10)]
    assert "TRN003" in _codes(steps)  # the generic reading: a 2-class classifier at chance
    codes = _codes(steps + _points([0.0] * 8))
    assert "TRN014" in codes
    assert "TRN003" not in codes


def test_chance_values_follow_trl_loss_code_at_zero_margin() -> None:
    from trainmedic.rules.trn.trn014_preference_at_chance import chance_level

    assert chance_level({"loss_type": ["sigmoid"]}) == pytest.approx(math.log(2))
    assert chance_level({"loss_type": ["hinge"]}) == 1.0
    assert chance_level({"loss_type": ["ipo"], "beta": 0.1}) == pytest.approx(25.0)
    weighted = chance_level({"loss_type": ["sigmoid", "hinge"], "loss_weights": [0.5, 2.0]})
    assert weighted == pytest.approx(0.5 * math.log(2) + 2.0)
    assert chance_level({"loss_type": ["sigmoid", "sft"]}) is None  # no single value there
    assert chance_level({"loss_type": ["sigmoid"], "use_weighting": True}) is None


def test_a_reference_synced_into_the_policy_every_step_is_named() -> None:
    from trainmedic.events import GuardObservation
    from trainmedic.record import RunRecord
    from trainmedic.registry import run_rules

    synced = {"reference": "synced", "ref_model_mixup_alpha": 1.0, "ref_model_sync_steps": 1}
    events = _points([0.0] * 6)
    setup = events[0]
    events[0] = GuardObservation(t=0.0, pid=1, check=setup.check, data={**setup.data, **synced}, step=1)
    [finding] = [f for f in run_rules(RunRecord.of(events)) if f.code == "TRN014"]
    assert finding.evidence["cause"] == "reference_is_policy"
    assert "sync_ref_model=True" in finding.message
    assert "sync_ref_model=False" in finding.fix
