"""A LoRA classifier whose head is not saved with its adapter (TOR015), or an adapter saved
before it trained (TOR016), with the transformers `Trainer` and PEFT on tinylm.

    python examples/llm/adapter_head_not_saved.py                          # healthy
    python examples/llm/adapter_head_not_saved.py --bug head-not-in-modules-to-save
    python examples/llm/adapter_head_not_saved.py --bug saved-before-training

The task: tell the arithmetic questions of tinylm's instruction data ("What is 3 plus 4?")
from the word tasks. `AutoModelForSequenceClassification` puts a new, random head (`score`)
on the base; the healthy script trains the LoRA adapters and the head
(`LoraConfig(modules_to_save=["score"])`), saves with `trainer.save_model()`, and reloads the
adapter as a user serves it: the base from its checkpoint, then `PeftModel.from_pretrained`.

`--bug head-not-in-modules-to-save`: the LoraConfig names no task_type and no modules_to_save
(a recipe written for a causal LM), and the script unfreezes the head by hand
(`requires_grad_(True)`): the head trains, but PEFT saves only what the config names, and the
reloaded model gets a fresh random head: its outputs are not the trained model's.
`--bug saved-before-training`: the adapter is saved right after `get_peft_model`, before
`trainer.train()`: every `lora_B` is still PEFT's initial zero.
The script prints the accuracy of the model in memory and of the reloaded one.
"""

import argparse
import sys
import tempfile
from pathlib import Path

from datasets import Dataset
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForSequenceClassification, AutoTokenizer, Trainer, TrainingArguments

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["head-not-in-modules-to-save", "saved-before-training"], default=None)
args = parser.parse_args()

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tinylm  # noqa: E402

MODEL = tinylm.cached()  # the stand-in for a Hub checkpoint, made once under the temp folder
torch.manual_seed(0)
tokenizer = AutoTokenizer.from_pretrained(MODEL)
tokenizer.pad_token = "<|endoftext|>"
rows = [
    {"text": row["prompt"], "label": int("plus" in row["prompt"] or "minus" in row["prompt"])}
    for row in tinylm.instructions(96)
]
data = Dataset.from_list(rows).map(
    lambda r: tokenizer(r["text"], truncation=True, max_length=32), batched=True
)


def load_base():
    base = AutoModelForSequenceClassification.from_pretrained(MODEL, num_labels=2)
    base.config.pad_token_id = tokenizer.pad_token_id
    return base


def accuracy(model):
    model.eval()
    batch = tokenizer([r["text"] for r in rows], padding=True, return_tensors="pt")
    with torch.no_grad():
        predicted = model(**batch).logits.argmax(-1)
    return (predicted == torch.tensor([r["label"] for r in rows])).float().mean().item()


modules = None if args.bug == "head-not-in-modules-to-save" else ["score"]
config = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], modules_to_save=modules)
model = get_peft_model(load_base(), config)
if args.bug == "head-not-in-modules-to-save":
    model.base_model.model.score.requires_grad_(True)
out = tempfile.mkdtemp(prefix="adapter-")  # kept: the saved adapter is the script's result
if args.bug == "saved-before-training":
    model.save_pretrained(out)
training = TrainingArguments(
    output_dir=out,
    max_steps=30,
    per_device_train_batch_size=16,
    learning_rate=5e-3,
    report_to=[],
    use_cpu=True,
    logging_steps=10,
    save_strategy="no",
)
trainer = Trainer(model=model, args=training, train_dataset=data, processing_class=tokenizer)
trainer.train()
if args.bug != "saved-before-training":
    trainer.save_model(out)
print(f"accuracy in memory {accuracy(model):.2f}")
reloaded = PeftModel.from_pretrained(load_base(), out)
print(f"accuracy reloaded from {out} {accuracy(reloaded):.2f}")
