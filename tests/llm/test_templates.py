"""DAT016 (training text vs the served chat template) and DAT017 (TRL's truncation at max_length),
on the tiny chat model: real TRL runs under the boot module (as under `trainmedic run`) and with
`trainmedic.hf.Guard` in process.

Under the boot module, ONE child runs `run_templates.py` with two SFT-then-serve scenarios (TRL
imported once; a marker event splits their events): Alpaca text truncated at 40 tokens, and its
healthy twin, conversations at 256. The crash at 30 tokens (TRL drops every example) runs alone
under `trainmedic run`: it is about the supervisor's reading of the crash and the exit status.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from trainmedic.events import GuardObservation
from trainmedic.llm import sft, templates
from trainmedic.record import RunRecord
from trainmedic.registry import run_rules

from ..helpers import run_instrumented

pytest.importorskip("trl")
# TRL 1.16's SFTConfig sets transformers' deprecated `gradient_checkpointing` name itself
pytestmark = pytest.mark.filterwarnings("ignore:`gradient_checkpointing` is deprecated:FutureWarning")
HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parents[1] / "examples" / "llm"
LLAMA2_TEMPLATE = (
    "{% for m in messages %}{% if m['role'] == 'user' %}{{ '<s>[INST] ' + m['content'] + ' [/INST]' }}"
    "{% else %}{{ ' ' + m['content'] + ' </s>' }}{% endif %}{% endfor %}"
)

SCENARIOS = ("alpaca:40", "chat:256")  # FORMAT:MAX_LENGTH, run by run_templates.py


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, tinylm_dir: Path) -> dict[str, RunRecord]:
    """The SCENARIOS in one child under the boot module; each one's record (the events the
    boot module sent before the first scenario, then that scenario's own)."""
    tmp = tmp_path_factory.mktemp("templates")
    argv = [sys.executable, str(HERE / "run_templates.py"), str(tinylm_dir), str(tmp / "out"), *SCENARIOS]
    run = run_instrumented(argv, tmp, timeout=400)
    assert run.result.returncode == 0, run.result.stderr[-3000:]
    preamble: list[Any] = []
    scenarios: dict[str, list[Any]] = {}
    events = preamble
    for event in run.record.events:
        if isinstance(event, GuardObservation) and event.check == "example_start":
            events = scenarios.setdefault(event.data["case"], [])
        else:
            events.append(event)
    assert list(scenarios) == list(SCENARIOS)
    return {case: RunRecord.of([*preamble, *events]) for case, events in scenarios.items()}


def _observed(record: RunRecord, check: str) -> list[dict[str, Any]]:
    return [e.data for e in record.events if isinstance(e, GuardObservation) and e.check == check]


# --- the measurements, on real data sets and the real tokenizer --------------------------------


def test_truncation_counts_tells_cut_from_complete_at_max_length() -> None:
    from datasets import Dataset

    eos = 2
    prepared = Dataset.from_dict(
        {
            "input_ids": [[5, 6, 7, eos, 9], [5, 6, 7, 8, 9], [5, 6, eos], [5, 6, 7, 8, eos]],
            "labels": [[-100, 6, 7, eos, 9], [-100, -100, 7, 8, 9], [-100, 6, eos], [5, 6, 7, 8, eos]],
        }
    )
    given = list(range(6))  # six examples given: two dropped by TRL
    counts = sft.truncation_counts(given, prepared, max_length=5, keep_end=False, packing=False, eos_id=eos)
    # the first ends "<EOS> \n" as a chat turn does, the last with EOS: both complete
    assert counts == {"max_length": 5, "examples": 6, "cut": 1, "dropped": 2}
    keep_end = sft.truncation_counts(given, prepared, max_length=5, keep_end=True, packing=False, eos_id=eos)
    assert keep_end is not None
    assert keep_end["cut"] == 1  # the last: its supervised text starts at 0
    assert (
        sft.truncation_counts(given, prepared, max_length=5, keep_end=False, packing=True, eos_id=eos) is None
    )


def test_template_marker_is_the_turn_boundary_after_the_user(tinylm_dir: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tinylm_dir)
    assert templates.template_marker(tokenizer, None) == "<|im_end|><|im_start|>assistant"
    assert templates.template_marker(tokenizer, LLAMA2_TEMPLATE) == "[/INST]"
    # a row cut at max_length inside its first turn still opens it as the template does
    assert templates.template_markers(tokenizer, None)[0] == "<|im_start|>user"
    assert templates.template_markers(tokenizer, LLAMA2_TEMPLATE)[0] == "<s>[INST]"


# --- as under `trainmedic run` ---------------------------------------------------------------------


@pytest.mark.slow
def test_alpaca_training_served_with_the_chat_template_and_truncated(served: dict[str, RunRecord]) -> None:
    found = {f.code: f for f in run_rules(served["alpaca:40"])}
    assert "DAT016" in found, [f.message for f in found.values()]
    template = found["DAT016"].evidence
    assert template["with_template"] == 0
    assert template["examples_checked"] == 32
    assert template["train_sample"].startswith("### Instruction:")
    assert template["served_sample"].startswith("<|im_start|>user")
    assert "DAT017" in found, [f.message for f in found.values()]
    truncated = found["DAT017"].evidence
    # the Alpaca prompts are 38 to 41 tokens long, their examples 43 to 49: at 40 tokens the
    # 41-token prompts leave no completion (TRL drops those 26), the others lose its end
    expected = {"trainer": "SFTTrainer", "max_length": 40, "examples": 64, "cut": 38, "dropped": 26}
    assert truncated == {**expected, "sampled": 64}


@pytest.mark.slow
def test_a_crash_on_an_empty_training_set_names_the_truncation_that_emptied_it(
    tmp_path: Path, tinylm_dir: Path
) -> None:
    # the Alpaca prompts are 38 to 41 tokens: at 30 TRL drops all 64 examples and the Trainer's
    # RandomSampler raises "num_samples=0" deep in `train()`
    # its own process, under `trainmedic run`: the supervisor reads the crash and the exit status
    argv = [
        sys.executable,
        str(HERE / "run_templates.py"),
        str(tinylm_dir),
        str(tmp_path / "out"),
        "alpaca:30",
    ]
    result = run_cli("run", "--quiet", "--out", str(tmp_path / "run"), "--", *argv, timeout=300)
    assert result.returncode == 1, result.stderr[-3000:]
    found = {f["code"]: f for f in json.loads((tmp_path / "run" / "findings.json").read_text())["findings"]}
    crash = found["RUN009"]
    assert "num_samples=0" in crash["message"]
    assert crash["message"].endswith(
        "; the training set was empty: SFTTrainer dropped all 64 examples, left without a completion "
        "at max_length 30 (DAT017 completion-truncated)"
    )
    assert crash["evidence"]["likely_cause"]["code"] == "DAT017"
    assert "truncation at max_length 30" in crash["fix"]
    assert "Raise `max_length`" in crash["fix"]
    assert found["DAT017"]["evidence"]["dropped"] == 64


@pytest.mark.slow
def test_chat_template_on_both_sides_and_a_generous_max_length_are_quiet(
    served: dict[str, RunRecord],
) -> None:
    record = served["chat:256"]
    # a healthy SFT run in TRL's quickstart shape: nothing at all to say (RUN004 once read the
    # curve without its last window: the Trainer's optimizer was gone when the process closed)
    assert [f.message for f in run_rules(record) if f.severity != "info"] == []
    assert max(s.step for s in record.steps) == 8
    # measured, not skipped: every sampled row carries the template, nothing was cut
    [template] = _observed(record, templates.OBSERVATION)
    assert template["with_template"] == template["examples_checked"] == 32
    [truncated] = _observed(record, sft.OBSERVATION)
    expected = {"trainer": "SFTTrainer", "max_length": 256, "examples": 64, "cut": 0, "dropped": 0}
    assert truncated == {**expected, "sampled": 64}


# --- in process, with trainmedic.hf.Guard ----------------------------------------------------------


def _train_with_guard(
    tinylm_dir: Path, tmp_path: Path, rows: list[dict[str, Any]], max_length: int = 1024
) -> tuple[Any, Any, Any]:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from trainmedic.hf import Guard

    tokenizer = AutoTokenizer.from_pretrained(tinylm_dir)
    model = AutoModelForCausalLM.from_pretrained(tinylm_dir)
    guard = Guard()
    args = SFTConfig(
        output_dir=str(tmp_path), max_steps=8, per_device_train_batch_size=4, report_to=[],
        save_strategy="no", use_cpu=True, disable_tqdm=True, max_length=max_length,
    )  # fmt: skip
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        callbacks=[guard],
    )
    trainer.train()
    return guard, model, tokenizer


def _serve(model: Any, tokenizer: Any) -> None:
    messages = [{"role": "user", "content": "What is two plus three?"}]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
    model.generate(**prompt, max_new_tokens=3, do_sample=False)


@pytest.mark.slow
def test_hf_guard_reports_alpaca_text_served_with_the_template_after_training(
    tinylm_dir: Path, tmp_path: Path
) -> None:
    sys.path.insert(0, str(EXAMPLES))
    import tinylm

    rows = [
        {"text": f"### Instruction:\n{r['prompt']}\n\n### Response:\n{r['completion']}"}
        for r in tinylm.instructions(64)
    ]
    guard, model, tokenizer = _train_with_guard(tinylm_dir, tmp_path, rows)
    assert "DAT016" not in [f.code for f in guard.findings()]  # nothing served yet
    # the sampling is over and its hook gone: the model's forwards cost nothing more
    hooks = [
        h
        for h in model._forward_pre_hooks.values()
        if isinstance(getattr(h, "__self__", None), templates.TemplateWatch)
    ]
    assert hooks == []
    _serve(model, tokenizer)
    [finding] = [f for f in guard.findings() if f.code == "DAT016"]
    assert finding.evidence["with_template"] == 0
    assert finding.evidence["examples_checked"] == 32
    assert "do not carry the tokenizer's chat template markers" in finding.message


def test_hf_guard_reports_what_truncation_cut_though_its_guard_starts_after_the_trainer(
    tinylm_dir: Path, tmp_path: Path
) -> None:
    """TRL prepares (and truncates) the data set in `SFTTrainer.__init__`; the callback's guard
    starts with `train()`: the counts wait for it."""
    sys.path.insert(0, str(EXAMPLES))
    import tinylm

    # the prompts (user turn + generation prompt) are 17-20 tokens: no reply survives 14; TRL
    # keeps the rows (its loss covers the prompt too), cut just after a turn's own EOS
    guard, _, _ = _train_with_guard(tinylm_dir, tmp_path, tinylm.conversations(64), max_length=14)
    [finding] = [f for f in guard.findings() if f.code == "DAT017"]
    assert finding.evidence["examples"] == finding.evidence["sampled"] == 64
    assert finding.evidence["max_length"] == 14
    assert (finding.evidence["dropped"], finding.evidence["cut"]) == (64, 0)
