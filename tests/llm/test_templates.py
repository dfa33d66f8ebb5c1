"""DAT016 (training text vs the served chat template) and DAT017 (TRL's truncation at max_length),
on the tiny chat model: real TRL runs under the boot module (as under `trainmedic run`) and with
`trainmedic.hf.Guard` in process."""

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
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "llm"
LLAMA2_TEMPLATE = (
    "{% for m in messages %}{% if m['role'] == 'user' %}{{ '<s>[INST] ' + m['content'] + ' [/INST]' }}"
    "{% else %}{{ ' ' + m['content'] + ' </s>' }}{% endif %}{% endfor %}"
)

# SFT on tinylm, then a generation prompt rendered with the tokenizer's chat template.
# argv: TINYLM_DIR FORMAT MAX_LENGTH OUTPUT_DIR
SCRIPT = """
import sys
sys.path.insert(0, {examples!r})
import tinylm
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer

path, fmt, max_length, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
tokenizer = AutoTokenizer.from_pretrained(path)
model = AutoModelForCausalLM.from_pretrained(path)
if fmt == "alpaca":  # prompt/completion in the Alpaca format: TRL trains on it as plain text
    head = "### Instruction:\\n{{}}\\n\\n### Response:\\n"
    pairs = tinylm.instructions(64)
    rows = [{{"prompt": head.format(r["prompt"]), "completion": r["completion"]}} for r in pairs]
else:  # conversational: TRL renders it with the chat template
    rows = tinylm.conversations(64)
args = SFTConfig(
    output_dir=out, max_steps=8, per_device_train_batch_size=4, max_length=max_length,
    report_to=[], save_strategy="no", use_cpu=True, disable_tqdm=True,
)
data = Dataset.from_list(rows)
SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer).train()
messages = [{{"role": "user", "content": "What is two plus three?"}}]
prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
print(tokenizer.decode(model.generate(**prompt, max_new_tokens=4, do_sample=False)[0]))
"""


def _run(tmp_path: Path, tinylm_dir: Path, fmt: str, max_length: int) -> Any:
    script = tmp_path / "sft_then_serve.py"
    script.write_text(SCRIPT.format(examples=str(EXAMPLES)))
    argv = [
        sys.executable,
        str(script),
        str(tinylm_dir),
        fmt,
        str(max_length),
        str(tmp_path / "out"),
    ]
    run = run_instrumented(argv, tmp_path, timeout=300)
    assert run.result.returncode == 0, run.result.stderr[-3000:]
    return run


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
def test_alpaca_training_served_with_the_chat_template_and_truncated(
    tmp_path: Path, tinylm_dir: Path
) -> None:
    run = _run(tmp_path, tinylm_dir, "alpaca", 40)
    found = {f.code: f for f in run_rules(run.record)}
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
    script = tmp_path / "sft_then_serve.py"
    script.write_text(SCRIPT.format(examples=str(EXAMPLES)))
    argv = [sys.executable, str(script), str(tinylm_dir), "alpaca", "30", str(tmp_path / "out")]
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
    tmp_path: Path, tinylm_dir: Path
) -> None:
    run = _run(tmp_path, tinylm_dir, "chat", 256)
    # a healthy SFT run in TRL's quickstart shape: nothing at all to say (RUN004 once read the
    # curve without its last window: the Trainer's optimizer was gone when the process closed)
    assert [f.message for f in run_rules(run.record) if f.severity != "info"] == []
    assert max(s.step for s in run.record.steps) == 8
    # measured, not skipped: every sampled row carries the template, nothing was cut
    [template] = _observed(run.record, templates.OBSERVATION)
    assert template["with_template"] == template["examples_checked"] == 32
    [truncated] = _observed(run.record, sft.OBSERVATION)
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
