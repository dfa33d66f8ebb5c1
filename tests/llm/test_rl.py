"""The RL watch (`trainmedic.llm.rl`): TRN015-TRN017 on real runs of TRL's `GRPOTrainer` and
`RLOOTrainer` with the tiny chat model and rule-based reward functions written as TRL's docs
write them. One run per case, shared by the tests of that case: a reward that is always 0
(TRN015) under the boot module as `trainmedic run` runs a script, the others in process with
`trainmedic.hf.Guard`; a healthy run whose early groups are uniform before it learns, and a
healthy RLOO run with its KL penalty, stay quiet."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from trainmedic.events import GuardObservation
from trainmedic.evidence.observations import RL_METRICS
from trainmedic.findings import Finding, Severity
from trainmedic.registry import run_rules

from ..helpers import run_instrumented

pytest.importorskip("transformers")
trl = pytest.importorskip("trl")
pytest.importorskip("datasets")
# TRL 1.16 reads transformers 5's deprecated `is_gradient_checkpointing` name itself.
pytestmark = pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")

from datasets import Dataset  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from trainmedic.hf import Guard  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "llm"))
import tinylm  # noqa: E402

OURS = {"TRN015", "TRN016", "TRN017"}
SCRIPT = ROOT / "benchmarks" / "foreign" / "llm" / "trl_grpo.py"
MAX_COMPLETION = 12


def ours(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.code in OURS]


# Reward functions as TRL's docs write them: completions are lists of messages.
def reward_len(completions: list[Any], **kwargs: Any) -> list[float]:
    """TRL's quick-start reward: answers of about 20 characters."""
    return [-abs(20 - len(c[0]["content"])) for c in completions]


def length_reward(completions: list[Any], **kwargs: Any) -> list[float]:
    """Longer answers are better."""
    return [len(c[0]["content"]) / 50 for c in completions]


def train(
    tinylm_dir: Path, out: Path, trainer: str, reward: Any, **config: Any
) -> tuple[list[Finding], list[GuardObservation]]:
    """A guarded run of TRL's `trainer` ("GRPO" or "RLOO"): 8 steps, 2 prompts of 4 completions."""
    tokenizer = AutoTokenizer.from_pretrained(tinylm_dir)
    tokenizer.pad_token = "<|endoftext|>"
    model = tinylm.answer_briefly(
        AutoModelForCausalLM.from_pretrained(tinylm_dir), tokenizer, first_token_end=0.93
    )
    model.save_pretrained(out / "start")  # TRL loads the reference from the path: the starting policy
    prompts = [{"prompt": [{"role": "user", "content": r["prompt"]}]} for r in tinylm.instructions(32)]
    args = getattr(trl, f"{trainer}Config")(
        output_dir=str(out), per_device_train_batch_size=8, num_generations=4,
        max_completion_length=MAX_COMPLETION, max_steps=8, logging_steps=1,
        save_strategy="no", report_to=[], use_cpu=True, bf16=False, disable_tqdm=True, seed=0,
        activation_checkpointing=False, **{"learning_rate": 1e-4, **config},
    )  # fmt: skip
    guard = Guard()
    getattr(trl, f"{trainer}Trainer")(
        model=str(out / "start"), reward_funcs=reward, args=args, train_dataset=Dataset.from_list(prompts),
        processing_class=tokenizer, callbacks=[guard],
    ).train()  # fmt: skip
    assert guard.guard is not None
    reads = [e for e in guard.guard.events if isinstance(e, GuardObservation) and e.check == RL_METRICS]
    return guard.findings(), reads


@pytest.fixture(scope="module")
def runs(tinylm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Each case's run, made on first use and shared by the tests of the module."""
    made: dict[str, tuple[list[Finding], list[GuardObservation]]] = {}

    def get(name: str) -> tuple[list[Finding], list[GuardObservation]]:
        if name not in made:
            trainer, reward, config = {
                "healthy": ("GRPO", reward_len, {"beta": 0.04}),  # with a KL penalty, as before TRL 0.19
                # 1e-3: at 1e-4 this random model's length barely moves in 8 steps; at 1e-3 one
                # step removes its EOS prior, so the healthy runs stay at 1e-4
                "length": ("GRPO", length_reward, {"learning_rate": 1e-3}),
                "rloo": ("RLOO", reward_len, {}),
            }[name]
            made[name] = train(tinylm_dir, tmp_path_factory.mktemp(name), trainer, reward, **config)
        return made[name]

    return get


def series(reads: list[GuardObservation], key: str) -> list[float]:
    return [r.data["metrics"][key] for r in reads if key in r.data["metrics"]]


@pytest.mark.slow
def test_reward_that_is_always_zero_is_trn015_under_run(tmp_path: Path) -> None:
    """TRL's docs' format reward (<think>...<answer>) on a model that never writes it."""
    run = run_instrumented(
        [
            sys.executable,
            str(SCRIPT),
            "--bug",
            "format-never-matched",
            "--steps",
            "6",
            "--out",
            str(tmp_path / "o"),
        ],
        tmp_path,
    )
    assert run.result.returncode == 0, run.result.stderr[-3000:]
    found = ours(run_rules(run.record))
    assert [f.code for f in found] == ["TRN015"], [f.message for f in found]
    finding = found[0]
    assert finding.severity is Severity.ERROR
    evidence = finding.evidence
    assert evidence["late_share"] == 1.0
    assert evidence["reward_values"] == [0.0]
    assert evidence["same_reward_everywhere"] is True
    assert evidence["reward_functions"] == {"format_reward": [0.0]}
    assert evidence["num_generations"] == 4
    assert evidence["trainer"] == "GRPOTrainer"
    assert set(evidence["grad_norm"]) == {0.0}  # no advantage, no gradient: what TRL logs
    assert "GRPOTrainer: 100% of the groups" in finding.message
    assert "the reward function returns a constant" in finding.message
    assert "num_generations" in finding.fix


@pytest.mark.slow
def test_healthy_grpo_whose_early_groups_are_uniform_is_quiet(runs: Any) -> None:
    found, reads = runs("healthy")
    shares = series(reads, "frac_reward_zero_std")
    assert len(shares) == 8
    assert shares[0] >= 0.5  # the start: most groups are all empty answers, all rewarded 0
    assert sum(shares[4:]) / 4 < 0.9  # then it learns to answer
    assert ours(found) == [], [f.message for f in ours(found)]


@pytest.mark.slow
def test_reward_for_length_is_trn017(runs: Any) -> None:
    found, _ = runs("length")
    assert [f.code for f in ours(found)] == ["TRN017"], [f.message for f in ours(found)]
    finding = ours(found)[0]
    evidence = finding.evidence
    assert evidence["max_completion_length"] == MAX_COMPLETION
    assert evidence["mean_length"][0] < MAX_COMPLETION / 2  # short answers at the start
    assert evidence["mean_length"][-1] >= 0.9 * MAX_COMPLETION
    assert evidence["clipped_ratio"][-1] >= 0.5
    assert evidence["reward"][-1] > evidence["reward"][0]
    assert re.search(r"climbed from [\d.]+ to [\d.]+ tokens of max_completion_length 12", finding.message)
    assert "mask_truncated_completions" in finding.fix


@pytest.mark.slow
def test_healthy_rloo_with_its_kl_penalty_is_quiet(runs: Any) -> None:
    """RLOO's k1 estimator may be negative per log; started from the reference, it is exactly 0
    at the first log and not negative beyond noise after it."""
    found, reads = runs("rloo")
    kl = series(reads, "kl")
    assert len(kl) == 8
    assert kl[0] == 0.0  # the policy is the reference at the first step
    assert reads[0].data["config"]["trainer"] == "RLOOTrainer"
    assert reads[0].data["config"]["beta"] == 0.05
    assert ours(found) == [], [f.message for f in ours(found)]


@pytest.mark.slow
def test_grpo_kl_is_never_negative_and_absent_without_beta(runs: Any) -> None:
    """GRPO's k3 estimator is >= 0 per token: TRN016 cannot come from it. With its default
    beta (0) GRPO logs no `kl` at all."""
    _, reads = runs("healthy")
    kl = series(reads, "kl")
    assert len(kl) == 8
    assert min(kl) >= 0.0
    assert reads[0].data["config"]["beta"] == 0.04
    _, reads = runs("length")
    assert series(reads, "kl") == []
    assert reads[0].data["config"]["beta"] == 0.0
