"""The parameter watch (`trainmedic.llm.params`): TOR012 adapters that learn nothing, TOR014 new
token rows never trained, and the HF Trainer's eval set compared by content (TRN009), on real
runs: a nanoGPT-style module of the user's own under PEFT, the tiny chat model under LoRA, the
HF Trainer. Under the boot module as `trainmedic run` runs a script, and in process with
`trainmedic.torch.guard` / `trainmedic.hf.Guard`. Each failing run has a healthy twin that is
measured (the watch attached and checked) and stays quiet."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from trainmedic.findings import Finding
from trainmedic.registry import run_rules

from ..helpers import run_instrumented

pytest.importorskip("transformers")
pytest.importorskip("peft")
pytest.importorskip("datasets")

from datasets import Dataset
from peft import LoraConfig, get_peft_model
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    DataCollatorForLanguageModeling,
    Trainer,
    TrainingArguments,
)

import torch
import trainmedic.hf  # imported before any resize: it learns the rows a resize adds
import trainmedic.torch as tm
from trainmedic.llm.params import AdapterWatch, NewRowsWatch

# PEFT 0.21's get_peft_model reads transformers 5's deprecated `is_gradient_checkpointing`.
pytestmark = pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "llm"
sys.path.insert(0, str(EXAMPLES))
import tinylm  # noqa: E402

OURS = {"TOR012", "TOR014", "TRN009"}

# A nanoGPT-style model of the user's own under PEFT: LoRA on its Linear layers, the head
# trained whole (modules_to_save), the blocks under activation checkpointing. REENTRANT=1 is the
# bug: the blocks' inputs do not require grad, so the adapters get none and lora_B stays 0.
NANOGPT_SCRIPT = """
import os, torch, torch.nn as nn, torch.nn.functional as F
from torch.utils.checkpoint import checkpoint
from peft import LoraConfig, get_peft_model

REENTRANT = os.environ.get("REENTRANT") == "1"

class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln, self.attn, self.mlp = nn.LayerNorm(d), nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x):
        return x + self.mlp(torch.relu(self.attn(self.ln(x))))

class GPT(nn.Module):
    def __init__(self, vocab=50, d=32):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(2))
        self.head = nn.Linear(d, vocab)

    def forward(self, idx, targets):
        x = self.wte(idx)
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=REENTRANT)
        logits = self.head(x)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

torch.manual_seed(0)
model = get_peft_model(GPT(), LoraConfig(r=4, target_modules=["attn", "mlp"], modules_to_save=["head"]))
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
for step in range(int(os.environ.get("STEPS", "30"))):
    idx = torch.randint(0, 50, (8, 16))
    loss = model(idx, idx)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
lora_b = sum(float(p.detach().abs().sum()) for n, p in model.named_parameters() if "lora_B" in n)
print("final loss", float(loss), "lora_B abs sum", lora_b)
"""

# Special tokens added and the embeddings resized, then LoRA without modules_to_save (the bug).
RESIZE_SCRIPT = """
import sys
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer
sys.path.insert(0, {examples!r})
import tinylm

torch.manual_seed(0)
tok = AutoTokenizer.from_pretrained(sys.argv[1])
model = AutoModelForCausalLM.from_pretrained(sys.argv[1])
tok.add_special_tokens({{"additional_special_tokens": ["<tool>", "</tool>"]}})
model.resize_token_embeddings(len(tok))
model = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
texts = [f"<tool>{{r['prompt']}}</tool> {{r['completion']}}<|im_end|>" for r in tinylm.instructions(64)]
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
model.train()
for step in range(12):
    ids = [tok(t)["input_ids"] for t in texts[(step * 8) % 64 : (step * 8) % 64 + 8]]
    n = min(map(len, ids))
    x = torch.tensor([i[:n] for i in ids])
    loss = model(input_ids=x, labels=x).loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def ours(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.code in OURS]


def watchers(guard: Any, kind: type) -> list[Any]:
    return [w for w in guard.monitor.watchers if isinstance(w, kind)]


# -- TOR012: adapters without gradient ------------------------------------------------------------
def test_reentrant_checkpointing_under_lora_is_tor012_naming_the_lora_tensors(tmp_path: Path) -> None:
    script = tmp_path / "nanogpt_lora.py"
    script.write_text(NANOGPT_SCRIPT)
    run = run_instrumented([sys.executable, str(script)], tmp_path, env={"REENTRANT": "1"}, timeout=240)
    assert run.result.returncode == 0, run.result.stderr[-3000:]
    assert "lora_B abs sum 0.0" in run.result.stdout  # really silent: lora_B never left zero
    found = [f for f in run_rules(run.record) if f.code == "TOR012"]
    assert len(found) == 1, [f.message for f in run_rules(run.record)]
    evidence = found[0].evidence
    assert evidence["count"] == evidence["adapter_tensors"] == 8  # lora_A, lora_B of 4 Linear layers
    assert all(".lora_A." in n or ".lora_B." in n for n in evidence["params"])
    assert evidence["grad_none"] is True
    assert any("head.modules_to_save" in n for n in evidence["others_with_grad"])  # the loss still moves
    assert found[0].message.startswith("All 8 adapter tensors learn nothing")
    assert "use_reentrant=False" in (found[0].fix or "")
    # TOR001's "never received a gradient" names the same tensors: one cause, one finding
    assert [f.code for f in run_rules(run.record) if f.code == "TOR001"] == []


def _nanogpt(reentrant: bool, steps: int = 12) -> tuple[list[Finding], Any]:
    namespace: dict[str, Any] = {}
    code = NANOGPT_SCRIPT.split("torch.manual_seed(0)", maxsplit=1)[0].replace(
        'os.environ.get("REENTRANT") == "1"', repr(reentrant)
    )
    exec(compile(code, "nanogpt", "exec"), namespace)
    torch.manual_seed(0)
    model = get_peft_model(
        namespace["GPT"](), LoraConfig(r=4, target_modules=["attn", "mlp"], modules_to_save=["head"])
    )
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    guard = tm.guard(model, optimizer, every=4)
    for _ in range(steps):
        idx = torch.randint(0, 50, (8, 16))
        loss = model(idx, idx)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return guard.stop(), guard


@pytest.mark.filterwarnings("ignore:None of the inputs have requires_grad=True:UserWarning")
def test_in_process_guard_sees_the_reentrant_bug_and_its_non_reentrant_twin_is_quiet() -> None:
    found, _ = _nanogpt(reentrant=True)
    assert [f.code for f in ours(found)] == ["TOR012"]
    found, guard = _nanogpt(reentrant=False)
    assert ours(found) == []
    (watch,) = watchers(guard, AdapterWatch)
    assert len(watch.names) == 8
    assert len(watch.checked_steps) >= 3
    assert all(watch.got_grad)


# -- the HF Trainer: a healthy LoRA run, and TRN009 by content --------------------------------------
def _trainer_run(tinylm_dir: Path, tmp_path: Path, *, eval_is_train: bool) -> tuple[list[Finding], Any]:
    tok = AutoTokenizer.from_pretrained(tinylm_dir)
    tok.pad_token = "<|endoftext|>"
    model = AutoModelForCausalLM.from_pretrained(tinylm_dir)
    model = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
    rows = tinylm.conversations(120)
    if eval_is_train:  # the data repeated before its split: the eval rows are training rows
        split = Dataset.from_list(rows * 3).train_test_split(test_size=0.1, seed=0)
        train, held = split["train"], split["test"]
    else:  # an honest split: no evaluation conversation occurs among the training ones
        seen = {str(r["messages"]) for r in rows}
        train = Dataset.from_list(rows)
        held = Dataset.from_list(
            [r for r in tinylm.conversations(200, seed=7) if str(r["messages"]) not in seen][:24]
        )

    def tokenize(row: dict[str, Any]) -> Any:
        return tok(tok.apply_chat_template(row["messages"], tokenize=False))

    train, held = (d.map(tokenize, remove_columns=["messages"]) for d in (train, held))
    guard = trainmedic.hf.Guard(every=2)
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=12,
        per_device_train_batch_size=8,
        per_device_eval_batch_size=32,
        learning_rate=1e-3,
        eval_strategy="steps",
        eval_steps=6,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
    )
    collator = DataCollatorForLanguageModeling(tok, mlm=False)
    Trainer(
        model=model,
        args=args,
        train_dataset=train,
        eval_dataset=held,
        data_collator=collator,
        callbacks=[guard],
    ).train()
    return guard.findings(), guard.guard


def test_healthy_lora_trainer_with_held_out_eval_is_quiet(tinylm_dir: Path, tmp_path: Path) -> None:
    found, guard = _trainer_run(tinylm_dir, tmp_path, eval_is_train=False)
    assert ours(found) == [], [f.message for f in ours(found)]
    (watch,) = watchers(guard, AdapterWatch)
    assert len(watch.names) == 8
    assert len(watch.checked_steps) >= 2
    assert all(watch.got_grad)


def test_trainer_eval_rows_that_are_training_rows_by_content_is_trn009(
    tinylm_dir: Path, tmp_path: Path
) -> None:
    found, _ = _trainer_run(tinylm_dir, tmp_path, eval_is_train=True)
    (finding,) = [f for f in found if f.code == "TRN009"]
    evidence = finding.evidence
    assert evidence["by_content"] is True
    assert evidence["same_object"] is False
    assert evidence["eval_rows"] == 36
    assert evidence["shared_rows"] >= 30
    assert evidence["train_rows_compared"] == evidence["train_rows_total"] == 324
    assert "are also training examples, token for token" in finding.message
    assert "Deduplicate" in (finding.fix or "")
    assert [f.code for f in ours(found)] == ["TRN009"]


# -- TOR014: rows added by a resize that never train ------------------------------------------------
def _resized_lora(
    tinylm_dir: Path, *, modules_to_save: bool = False, pad_only: bool = False
) -> tuple[list[Finding], Any]:
    """Special tokens added and the rows resized, then LoRA, in a plain loop under the torch guard.
    `pad_only`: the Llama recipe that adds a "[PAD]" token only (its rows need no training)."""
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(tinylm_dir)
    model = AutoModelForCausalLM.from_pretrained(tinylm_dir)
    if pad_only:
        tok.add_special_tokens({"pad_token": "[PAD]"})
        texts = [f"{r['prompt']} {r['completion']}<|im_end|>" for r in tinylm.instructions(64)]
    else:
        tok.add_special_tokens({"additional_special_tokens": ["<tool>", "</tool>"]})
        tok.pad_token = "<|endoftext|>"
        texts = [f"<tool>{r['prompt']}</tool> {r['completion']}<|im_end|>" for r in tinylm.instructions(64)]
    model.resize_token_embeddings(len(tok))
    extra = {"modules_to_save": ["embed_tokens", "lm_head"]} if modules_to_save else {}
    model = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], **extra))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    guard = tm.guard(model, optimizer, every=4)
    model.train()
    for step in range(12):
        batch = tok(texts[(step * 8) % 64 : (step * 8) % 64 + 8], return_tensors="pt", padding=True)
        labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        loss = model(**batch, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return guard.stop(), guard


def test_resize_then_lora_without_modules_to_save_is_tor014_and_with_it_quiet(tinylm_dir: Path) -> None:
    found, _ = _resized_lora(tinylm_dir)
    (finding,) = ours(found)
    assert finding.code == "TOR014"
    assert finding.evidence["added_rows"] == [400, 402]
    assert finding.evidence["tokens_seen"] == [400, 401]
    assert [m["matrix"] for m in finding.evidence["matrices"]] == ["input embedding", "output head"]
    assert not any(m["trainable"] for m in finding.evidence["matrices"])
    assert "modules_to_save" in (finding.fix or "")

    found, guard = _resized_lora(tinylm_dir, modules_to_save=True)
    assert ours(found) == [], [f.message for f in ours(found)]
    (watch,) = watchers(guard, NewRowsWatch)
    assert watch.seen == {400, 401}  # measured: the rows were used, and changed
    assert len(watch.checked_steps) >= 2


def test_a_new_pad_token_under_lora_is_quiet(tinylm_dir: Path) -> None:
    """Padding is no use of a token: its positions are masked (the guard gets no tokenizer and
    the model's config names no pad id here, so the attention mask alone tells)."""
    found, guard = _resized_lora(tinylm_dir, pad_only=True)
    assert ours(found) == [], [f.message for f in ours(found)]
    (watch,) = watchers(guard, NewRowsWatch)
    assert watch.rows == range(400, 401)
    assert watch.seen == set()
    assert watch.pad_ids == set()


@pytest.mark.slow
def test_resize_under_the_boot_module_is_tor014(tinylm_dir: Path, tmp_path: Path) -> None:
    script = tmp_path / "resize_lora.py"
    script.write_text(RESIZE_SCRIPT.format(examples=str(EXAMPLES)))
    run = run_instrumented([sys.executable, str(script), str(tinylm_dir)], tmp_path, timeout=240)
    assert run.result.returncode == 0, run.result.stderr[-3000:]
    found = [f for f in run_rules(run.record) if f.code in OURS]
    assert [f.code for f in found] == ["TOR014"], [f.message for f in found]
    assert found[0].message.startswith("2 token ids added by resize_token_embeddings (rows 400-401) occur")
