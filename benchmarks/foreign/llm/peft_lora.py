"""LoRA fine-tuning with PEFT and the transformers `Trainer`, as PEFT's LoRA guide writes it:
`LoraConfig(task_type="CAUSAL_LM", ...)`, `get_peft_model`, `print_trainable_parameters()`,
then a plain `Trainer` with `DataCollatorForLanguageModeling(mlm=False)`.

The chat data teaches a reasoning format: each answer starts with a `<think>...</think>`
trace, and the two tags are new special tokens, added to the tokenizer with
`add_special_tokens` and to the model with `resize_token_embeddings`. The new rows of the
input embedding and of `lm_head` start random (mean-initialised), so they must be trained:
the LoRA guide's advice is to list the embedding and the head in `modules_to_save`. The pad
token is Qwen's `<|endoftext|>`, distinct from the EOS `<|im_end|>`.

The "Hub checkpoint" is tinylm (examples/llm/tinylm.py, made once under the system temp
folder). Healthy as written: the loss falls from about 6 to under 1.

`--bug new-tokens-no-modules-to-save`: the same run without `modules_to_save` (the LoRA
config of a recipe without new tokens). PEFT trains only the adapters of the attention and
MLP projections; the embedding and `lm_head` rows of `<think>` and `</think>` stay at their
initial values all run, so the model can neither read nor write the tags it was trained on
(TOR014 new-tokens-untrained). Nothing fails: the loss still falls, if only from 5.8 to 5.0
(in a model this small the embedding and the head hold most of the weights), and the script's
final check shows the new rows unchanged (0 against 0.14 in the healthy run).
"""

import argparse
import sys
import tempfile
from pathlib import Path

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

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["new-tokens-no-modules-to-save"], default=None)
parser.add_argument("--out", default=None, help="output_dir (default: a fresh temporary folder)")
args = parser.parse_args()

# -- the stand-in for a Hub checkpoint: tinylm, made once under the temp folder -----------
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "llm"))
import tinylm  # noqa: E402

MODEL = tinylm.cached()  # made once, shared by parallel runs
# ------------------------------------------------------------------------------------------

torch.manual_seed(0)
tokenizer = AutoTokenizer.from_pretrained(MODEL)
tokenizer.pad_token = "<|endoftext|>"
model = AutoModelForCausalLM.from_pretrained(MODEL)

tokenizer.add_special_tokens({"additional_special_tokens": ["<think>", "</think>"]})
model.resize_token_embeddings(len(tokenizer))
new_ids = tokenizer.convert_tokens_to_ids(["<think>", "</think>"])

peft_config = LoraConfig(
    task_type="CAUSAL_LM",
    r=16,
    lora_alpha=32,
    lora_dropout=0.05,
    target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    modules_to_save=None if args.bug == "new-tokens-no-modules-to-save" else ["embed_tokens", "lm_head"],
)
model = get_peft_model(model, peft_config)
model.print_trainable_parameters()


def with_reasoning(row):
    question, answer = row["prompt"], row["completion"]
    return {
        "messages": [
            {"role": "user", "content": question},
            {"role": "assistant", "content": f"<think>{question}</think>{answer}"},
        ]
    }


def tokenize(example):
    return tokenizer.apply_chat_template(example["messages"], tokenize=True, return_dict=True)


dataset = Dataset.from_list([with_reasoning(r) for r in tinylm.instructions(600)])
dataset = dataset.map(tokenize, remove_columns=["messages"])

before = model.get_input_embeddings().weight[new_ids].detach().clone()
training_args = TrainingArguments(
    output_dir=args.out or tempfile.mkdtemp(prefix="peft-lora-"),
    num_train_epochs=2,
    per_device_train_batch_size=16,
    learning_rate=1e-2,
    lr_scheduler_type="linear",
    warmup_steps=5,
    logging_steps=10,
    save_strategy="no",
    report_to="none",
    use_cpu=True,
    disable_tqdm=True,
    seed=0,
)
trainer = Trainer(
    model=model,
    args=training_args,
    train_dataset=dataset,
    data_collator=DataCollatorForLanguageModeling(tokenizer=tokenizer, mlm=False),
)
trainer.train()

moved = (model.get_input_embeddings().weight[new_ids].detach() - before).abs().max().item()
print(f"largest change of the <think>/</think> embedding rows: {moved:.3g}")
