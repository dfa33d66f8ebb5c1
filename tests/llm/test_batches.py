"""The label watch (`trainmedic.llm.batches`): TOR010, TOR011 and TOR013 on real runs of the tiny
chat model, under the boot module as `trainmedic run` runs a script, and in process with
`trainmedic.hf.Guard` / `trainmedic.torch.guard`. Each failing run has a healthy twin that is
measured (the watch counted its batches) and stays quiet."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from trainmedic.findings import Finding, Severity
from trainmedic.llm.batches import LabelWatch
from trainmedic.registry import run_rules

from ..helpers import run_instrumented

pytest.importorskip("transformers")
pytest.importorskip("trl")
pytest.importorskip("datasets")
# PEFT 0.21 reads transformers' deprecated `is_gradient_checkpointing` name itself.
pytestmark = pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")

from datasets import Dataset  # noqa: E402
from transformers import (  # noqa: E402
    AutoModelForCausalLM,
    AutoTokenizer,
    DataCollatorForSeq2Seq,
    Trainer,
    TrainingArguments,
)

import torch  # noqa: E402  (after the skips: transformers brings torch)
import trainmedic.torch as tm  # noqa: E402
from trainmedic.hf import Guard  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "llm"
sys.path.insert(0, str(EXAMPLES))
import tinylm  # noqa: E402

OURS = {"TOR010", "TOR011", "TOR013"}

# The transformers docs' causal-LM recipe on chat text: DataCollatorForLanguageModeling(mlm=False)
# labels every pad id -100. PAD=eos sets `pad_token = eos_token` (the bug), else a distinct one.
# The Trainer gets no `processing_class`: the tokenizer is the data collator's.
LM_COLLATOR_SCRIPT = """
import os, sys
sys.path.insert(0, {examples!r})
import tinylm
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, DataCollatorForLanguageModeling
from transformers import Trainer, TrainingArguments

tok = AutoTokenizer.from_pretrained(sys.argv[1])
model = AutoModelForCausalLM.from_pretrained(sys.argv[1])
tok.pad_token = tok.eos_token if os.environ["PAD"] == "eos" else "<|endoftext|>"
texts = [tok.apply_chat_template(c["messages"], tokenize=False) for c in tinylm.conversations(64)]
ds = Dataset.from_dict({{"text": texts}}).map(lambda b: tok(b["text"]), batched=True, remove_columns=["text"])
args = TrainingArguments(output_dir=sys.argv[2], max_steps=8, per_device_train_batch_size=8,
                         learning_rate=1e-3, logging_steps=1, report_to=[], save_strategy="no",
                         use_cpu=True, disable_tqdm=True)
Trainer(model=model, args=args, train_dataset=ds,
        data_collator=DataCollatorForLanguageModeling(tok, mlm=False)).train()
"""


def ours(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.code in OURS]


def label_watch(watchers: list[Any]) -> LabelWatch:
    (watch,) = [w for w in watchers if isinstance(w, LabelWatch)]
    return watch


def run_lm_collator(tinylm_dir: Path, tmp_path: Path, pad: str) -> list[Finding]:
    script = tmp_path / "train.py"
    script.write_text(LM_COLLATOR_SCRIPT.format(examples=str(EXAMPLES)))
    run = run_instrumented(
        [sys.executable, str(script), str(tinylm_dir), str(tmp_path / "out")], tmp_path, env={"PAD": pad}
    )
    assert run.result.returncode == 0, run.result.stderr[-3000:]
    return run_rules(run.record)


@pytest.mark.slow
def test_pad_token_eos_with_the_lm_collator_is_tor011_under_run(tinylm_dir: Path, tmp_path: Path) -> None:
    found = ours(run_lm_collator(tinylm_dir, tmp_path, "eos"))
    assert [f.code for f in found] == ["TOR011"], [f.message for f in found]
    finding = found[0]
    assert finding.severity is Severity.WARNING
    evidence = finding.evidence
    assert evidence["eos_supervised"] == 0
    assert evidence["eos_masked"] >= 64  # each example's own EOS (two turns each), masked as padding
    assert evidence["pad_is_eos"] is True  # the collator's tokenizer says so
    assert evidence["eos_ids"] == [2]
    assert evidence["eos_tokens"] == ["<|im_end|>"]
    assert evidence["rows"] >= 56  # the first forward may come before the watch
    assert "'<|im_end|>' (id 2)" in finding.message
    assert "the pad token is EOS" in finding.message
    assert "distinct from EOS" in finding.fix


@pytest.mark.slow
def test_distinct_pad_token_with_the_lm_collator_is_quiet_under_run(tinylm_dir: Path, tmp_path: Path) -> None:
    assert ours(run_lm_collator(tinylm_dir, tmp_path, "distinct")) == []


def completion_masked_trainer(tinylm_dir: Path, tmp_path: Path, *, max_length: int, eos: bool) -> Trainer:
    """The alpaca-lora recipe: prompt labels set to -100 by hand, the text truncated at
    `max_length`, DataCollatorForSeq2Seq padding the labels with -100."""
    tok = AutoTokenizer.from_pretrained(tinylm_dir)
    tok.pad_token = "<|endoftext|>"
    model = AutoModelForCausalLM.from_pretrained(tinylm_dir)

    def tokenize(row: dict[str, str]) -> dict[str, list[int]]:
        turn = [{"role": "user", "content": row["prompt"]}]
        prompt = tok.apply_chat_template(turn, tokenize=False, add_generation_prompt=True)
        prompt_ids = tok(prompt)["input_ids"]
        text = prompt + row["completion"] + (tok.eos_token if eos else "")
        ids = tok(text, truncation=True, max_length=max_length)["input_ids"]
        labels = [-100] * min(len(prompt_ids), len(ids)) + ids[len(prompt_ids) :]
        return {"input_ids": ids, "attention_mask": [1] * len(ids), "labels": labels}

    data = Dataset.from_list(tinylm.instructions(48)).map(tokenize, remove_columns=["prompt", "completion"])
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=6, per_device_train_batch_size=8, learning_rate=1e-3,
        logging_steps=1, report_to=[], save_strategy="no", use_cpu=True, disable_tqdm=True,
    )  # fmt: skip
    collator = DataCollatorForSeq2Seq(tok, padding=True)
    return Trainer(model=model, args=args, train_dataset=data, processing_class=tok, data_collator=collator)


def train_guarded(trainer: Trainer) -> tuple[list[Finding], LabelWatch]:
    guard = Guard()
    trainer.add_callback(guard)
    trainer.train()
    assert guard.guard is not None
    return guard.findings(), label_watch(guard.guard.monitor.watchers)


def test_max_length_that_cuts_every_completion_is_tor010(tinylm_dir: Path, tmp_path: Path) -> None:
    everything, _ = train_guarded(completion_masked_trainer(tinylm_dir, tmp_path, max_length=10, eos=True))
    # the model's loss is 0 / 0 = NaN: TOR010 names the cause, TRN001 (a NaN loss) steps aside
    assert "TRN001" not in [f.code for f in everything]
    found = ours(everything)
    assert [f.code for f in found] == ["TOR010"], [f.message for f in found]
    finding = found[0]
    assert finding.severity is Severity.ERROR
    assert finding.evidence["supervised"] == 0
    assert finding.evidence["batches"] == 6
    assert finding.evidence["rows"] == finding.evidence["rows_unsupervised"] == 48
    assert finding.message.startswith(
        "No label is supervised in the 6 training batches measured (48 examples"
    )
    assert "max_length" in finding.fix


def test_completions_kept_with_eos_are_quiet(tinylm_dir: Path, tmp_path: Path) -> None:
    found, watch = train_guarded(completion_masked_trainer(tinylm_dir, tmp_path, max_length=64, eos=True))
    assert ours(found) == []
    counts = watch.totals.counts
    assert watch.totals.batches == 6
    assert counts["masked_attended"] > 0  # the masked prompts: shaped as fine-tuning
    # One EOS per completion, supervised, in the first batch; read at the check of step 1, it
    # settles TOR011 and the EOS counts stop: later batches pay only for the supervised count.
    assert counts["eos_supervised"] == 8


def test_completions_without_eos_are_tor011(tinylm_dir: Path, tmp_path: Path) -> None:
    found, _ = train_guarded(completion_masked_trainer(tinylm_dir, tmp_path, max_length=64, eos=False))
    found = ours(found)
    assert [f.code for f in found] == ["TOR011"], [f.message for f in found]
    evidence = found[0].evidence
    assert evidence["eos_supervised"] == 0
    assert evidence["pad_is_eos"] is False
    assert evidence["eos_masked"] == 48  # the prompt's own end of turn, masked with the prompt
    assert "always with label -100" in found[0].message


def sft_run(tinylm_dir: Path, tmp_path: Path, *, lora: bool) -> tuple[list[Finding], LabelWatch]:
    from trl import SFTConfig, SFTTrainer

    config = SFTConfig(
        output_dir=str(tmp_path / "out"), max_steps=6, per_device_train_batch_size=8, learning_rate=1e-3,
        report_to=[], save_strategy="no", use_cpu=True, bf16=False, disable_tqdm=True,
        activation_checkpointing=False,
    )  # fmt: skip
    peft_config = None
    if lora:
        peft = pytest.importorskip("peft")
        peft_config = peft.LoraConfig(
            r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"
        )
    trainer = SFTTrainer(
        model=AutoModelForCausalLM.from_pretrained(tinylm_dir),
        args=config,
        train_dataset=Dataset.from_list(tinylm.conversations(48)),
        processing_class=AutoTokenizer.from_pretrained(tinylm_dir),
        peft_config=peft_config,
    )
    return train_guarded(trainer)


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_healthy_sft_trainer_on_conversations_is_quiet(tinylm_dir: Path, tmp_path: Path, lora: bool) -> None:
    found, watch = sft_run(tinylm_dir, tmp_path, lora=lora)
    assert ours(found) == []
    assert watch.totals.batches == 6
    assert watch.totals.counts["eos_supervised"] > 0
    assert watch.totals.counts["shift_agree"] < watch.totals.counts["same_agree"]


def plain_loop(tinylm_dir: Path, *, labels: str, text: str = "raw") -> tuple[list[Finding], LabelWatch]:
    """A hand-written loop on LlamaForCausalLM (6 steps of 8 examples of one length)."""
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(tinylm_dir)
    model = AutoModelForCausalLM.from_pretrained(tinylm_dir)
    if text == "raw":  # continued pre-training style: plain text, no template, no EOS
        texts = [f"{r['prompt']} {r['completion']}" for r in tinylm.instructions(48)]
    else:
        texts = [tok.apply_chat_template(c["messages"], tokenize=False) for c in tinylm.conversations(48)]
    ids = [tok(t)["input_ids"] for t in texts]
    data = torch.tensor([i[: min(map(len, ids))] for i in ids])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with tm.guard() as guard:
        model.train()
        for step in range(6):
            batch = data[step * 8 : (step + 1) * 8]
            if labels == "shifted":
                out = model(input_ids=batch[:, :-1], labels=batch[:, 1:])
            elif labels == "quarter-masked":
                masked = batch.clone()
                masked[:2] = -100
                out = model(input_ids=batch, labels=masked)
            else:
                out = model(input_ids=batch, labels=batch)
            out.loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    return guard.findings(), label_watch(guard.monitor.watchers)


def test_pre_shifted_labels_are_tor013(tinylm_dir: Path) -> None:
    found, _ = plain_loop(tinylm_dir, labels="shifted")
    found = ours(found)
    assert [f.code for f in found] == ["TOR013"], [f.message for f in found]
    evidence = found[0].evidence
    assert evidence["shift_agree"] == evidence["shift_compared"] >= 64
    assert evidence["same_agree"] < evidence["shift_compared"] / 10
    assert evidence["model_class"] == "LlamaForCausalLM"
    assert "LlamaForCausalLM shifts them again" in found[0].message
    assert "labels=input_ids" in found[0].fix


def test_labels_equal_to_inputs_on_text_without_eos_are_quiet(tinylm_dir: Path) -> None:
    """The healthy twin, and continued pre-training: nothing masked, no EOS anywhere."""
    found, watch = plain_loop(tinylm_dir, labels="inputs")
    assert ours(found) == []
    counts = watch.totals.counts
    assert watch.totals.batches >= 5
    assert counts["eos_supervised"] == counts["masked_attended"] == 0
    assert counts["same_agree"] == counts["shift_compared"]


def test_a_quarter_of_examples_without_supervised_labels_is_a_tor010_warning(tinylm_dir: Path) -> None:
    found, _ = plain_loop(tinylm_dir, labels="quarter-masked", text="chat")
    found = ours(found)
    assert [(f.code, f.severity) for f in found] == [("TOR010", Severity.WARNING)], [f.message for f in found]
    evidence = found[0].evidence
    assert evidence["rows_unsupervised"] * 4 == evidence["rows"] >= 40
    assert "have no supervised label" in found[0].message


def test_packed_examples_without_eos_are_not_taken_for_masked_prompts(
    tinylm_dir: Path, tmp_path: Path
) -> None:
    """DataCollatorWithFlattening labels the first token of each packed example -100: those
    positions (position_ids 0) are no target, so pre-training on packed text stays quiet."""
    from transformers import DataCollatorWithFlattening

    tok = AutoTokenizer.from_pretrained(tinylm_dir)
    texts = [f"{r['prompt']} {r['completion']}" for r in tinylm.instructions(48)]
    data = Dataset.from_dict({"text": texts}).map(
        lambda b: tok(b["text"]), batched=True, remove_columns=["text"]
    )
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=6, per_device_train_batch_size=8, report_to=[],
        save_strategy="no", use_cpu=True, disable_tqdm=True,
    )  # fmt: skip
    model = AutoModelForCausalLM.from_pretrained(tinylm_dir)
    trainer = Trainer(model=model, args=args, train_dataset=data, data_collator=DataCollatorWithFlattening())
    found, watch = train_guarded(trainer)
    assert ours(found) == []
    counts = watch.totals.counts
    assert watch.totals.batches == 6
    assert counts["supervised"] > 0
    assert counts["eos_supervised"] == counts["masked_attended"] == 0
