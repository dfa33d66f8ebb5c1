"""Causal language-model fine-tuning with the transformers `Trainer`, as the "Causal language
modeling" task guide writes it: tokenize the texts with `Dataset.map`, pad each batch with
`DataCollatorForLanguageModeling(tokenizer, mlm=False)` (the labels are the inputs; the model
shifts them), `TrainingArguments` and `Trainer`, evaluation, then `generate`.

The texts are tinylm's chat turns rendered with the tokenizer's chat template, each ending
with the EOS `<|im_end|>`. The tokenizer has no pad token (like Qwen's and Llama's); the
script gives it Qwen's own, `<|endoftext|>`. The "Hub checkpoint" is tinylm
(examples/llm/tinylm.py, made once under the system temp folder). Healthy as written: the
loss falls from about 5.3 to 0.6 and the model answers in 8 tokens, the last `<|im_end|>`.

The bugs:
- `pad-is-eos`: `tokenizer.pad_token = tokenizer.eos_token`, the line of the task guide and of
  countless notebooks. The collator sets the labels of every pad-token id to -100, and the
  pad id is the EOS id: every `<|im_end|>` of the data is masked, so the model is never
  taught to end a turn. The loss falls as in the healthy run; `generate` answers, then runs
  on into a new assistant turn until `max_new_tokens` (TOR011 eos-never-supervised);
- `completion-masked-cut`: the completion-only variant users write next (the prompt's labels
  set to -100 by the script, `DataCollatorForSeq2Seq` to pad the labels) with a few-shot
  system prompt added to every example and `max_length=48` kept: the prompts now take 60-65
  tokens, so truncation removes every completion and every label is -100. The Trainer trains
  without a word, logs a loss of 0 from the first step and an eval loss of nan (TOR010
  no-supervised-tokens).
"""

import argparse
import sys
import tempfile
from pathlib import Path

from datasets import Dataset
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    DataCollatorForLanguageModeling,
    DataCollatorForSeq2Seq,
    Trainer,
    TrainingArguments,
)

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["pad-is-eos", "completion-masked-cut"], default=None)
parser.add_argument("--out", default=None, help="output_dir (default: a fresh temporary folder)")
args = parser.parse_args()

# -- the stand-in for a Hub checkpoint: tinylm, made once under the temp folder -----------
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "llm"))
import tinylm  # noqa: E402

MODEL = tinylm.cached()  # made once, shared by parallel runs
# ------------------------------------------------------------------------------------------

torch.manual_seed(0)
tokenizer = AutoTokenizer.from_pretrained(MODEL)
if args.bug == "pad-is-eos":
    tokenizer.pad_token = tokenizer.eos_token
else:
    tokenizer.pad_token = "<|endoftext|>"
model = AutoModelForCausalLM.from_pretrained(MODEL)

MAX_LENGTH = 48
FEW_SHOT = (
    "You are a helpful assistant. What is one plus two? one plus two is three. "
    "Reverse the words: apple river stone. stone river apple."
)


def render(row, system=None):
    messages = [{"role": "user", "content": row["prompt"]}]
    if system:
        messages.insert(0, {"role": "system", "content": system})
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return {"prompt": prompt, "text": prompt + row["completion"] + tokenizer.eos_token + "\n"}


def tokenize(batch):
    return tokenizer(batch["text"], truncation=True, max_length=MAX_LENGTH)


def tokenize_completion_only(example):
    """Labels only on the answer: the prompt's tokens are set to -100."""
    tokens = tokenizer(example["text"], truncation=True, max_length=MAX_LENGTH)
    n_prompt = len(tokenizer(example["prompt"])["input_ids"])
    tokens["labels"] = [-100] * n_prompt + tokens["input_ids"][n_prompt:]
    tokens["labels"] = tokens["labels"][: len(tokens["input_ids"])]
    return tokens


# training rows, and held-out rows: questions that never occur in the training data
train_rows = tinylm.instructions(480)
seen = {r["prompt"] for r in train_rows}
eval_rows = [r for r in tinylm.instructions(200, seed=7) if r["prompt"] not in seen][:40]
system = FEW_SHOT if args.bug == "completion-masked-cut" else None
raw = {
    "train": Dataset.from_list([render(r, system) for r in train_rows]),
    "test": Dataset.from_list([render(r, system) for r in eval_rows]),
}
if args.bug == "completion-masked-cut":
    split = {k: d.map(tokenize_completion_only, remove_columns=["prompt", "text"]) for k, d in raw.items()}
    data_collator = DataCollatorForSeq2Seq(tokenizer, padding=True)
else:
    split = {k: d.map(tokenize, batched=True, remove_columns=["prompt", "text"]) for k, d in raw.items()}
    data_collator = DataCollatorForLanguageModeling(tokenizer=tokenizer, mlm=False)

training_args = TrainingArguments(
    output_dir=args.out or tempfile.mkdtemp(prefix="clm-trainer-"),
    num_train_epochs=3,
    per_device_train_batch_size=16,
    per_device_eval_batch_size=40,
    learning_rate=3e-3,
    weight_decay=0.01,
    warmup_steps=5,
    logging_steps=10,
    eval_strategy="epoch",
    save_strategy="no",
    report_to="none",
    use_cpu=True,
    disable_tqdm=True,
    seed=0,
)
trainer = Trainer(
    model=model,
    args=training_args,
    train_dataset=split["train"],
    eval_dataset=split["test"],
    data_collator=data_collator,
    processing_class=tokenizer,
)
trainer.train()
print(trainer.evaluate())

prompt = render({"prompt": "How many letters are in the word river?", "completion": ""}, system)["prompt"]
inputs = tokenizer(prompt, return_tensors="pt")
output = model.generate(**inputs, max_new_tokens=24, do_sample=False, pad_token_id=tokenizer.pad_token_id)
answer = output[0][inputs["input_ids"].shape[1] :]
print(f"{len(answer)} new tokens: {tokenizer.decode(answer)!r}")
