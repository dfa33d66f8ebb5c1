"""Causal language-model fine-tuning in a plain loop, in the style of transformers'
`examples/pytorch/language-modeling/run_clm_no_trainer.py`: tokenize the texts, concatenate
and cut them into blocks (`group_texts`, labels a copy of the inputs), `default_data_collator`,
AdamW without decay on biases and norms, `get_scheduler("linear")`, an `Accelerator`, and the
perplexity of a held-out set after every epoch.

The texts are tinylm's chat turns rendered with its chat template; the "Hub checkpoint" is
tinylm (examples/llm/tinylm.py, made once under the system temp folder). Healthy as written:
the loss falls from about 6 to 0.75, the evaluation perplexity to about 2, and the model
answers a question in the data's format ("The word harbor has six letters.<|im_end|>").

`--bug pre-shifted-labels`: the loop feeds `input_ids[:, :-1]` with `labels=input_ids[:, 1:]`,
the shift of a hand-written GPT (nanoGPT's `x, y = data[i:i+n], data[i+1:i+n+1]`). A Hugging
Face causal LM shifts the labels itself, so each position is trained to predict the token two
ahead. Nothing fails and the curves look healthy: this templated data makes the token after
next almost as predictable as the next (loss 0.84 against 0.76, perplexity 2.2 against 2.0).
The model generates every other token (" plus is.\n is.\nus\nus") (TOR013
labels-double-shifted).
"""

import argparse
import math
import sys
from itertools import chain
from pathlib import Path

from accelerate import Accelerator
from datasets import Dataset
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM, AutoTokenizer, default_data_collator, get_scheduler

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["pre-shifted-labels"], default=None)
parser.add_argument("--num_train_epochs", type=int, default=3)
parser.add_argument("--block_size", type=int, default=64)
parser.add_argument("--learning_rate", type=float, default=3e-3)
args = parser.parse_args()

# -- the stand-in for a Hub checkpoint: tinylm, made once under the temp folder -----------
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "llm"))
import tinylm  # noqa: E402

MODEL = tinylm.cached()  # made once, shared by parallel runs
# ------------------------------------------------------------------------------------------

accelerator = Accelerator(cpu=True)
torch.manual_seed(0)
tokenizer = AutoTokenizer.from_pretrained(MODEL)
model = AutoModelForCausalLM.from_pretrained(MODEL)


def as_text(rows):
    chats = [
        [{"role": "user", "content": r["prompt"]}, {"role": "assistant", "content": r["completion"]}]
        for r in rows
    ]
    return Dataset.from_dict({"text": [tokenizer.apply_chat_template(c, tokenize=False) for c in chats]})


def tokenize_function(examples):
    return tokenizer(examples["text"])


def group_texts(examples):
    concatenated = {k: list(chain(*examples[k])) for k in examples}
    total_length = (len(concatenated["input_ids"]) // args.block_size) * args.block_size
    result = {
        k: [t[i : i + args.block_size] for i in range(0, total_length, args.block_size)]
        for k, t in concatenated.items()
    }
    result["labels"] = result["input_ids"].copy()
    return result


raw = {"train": as_text(tinylm.instructions(1200)), "validation": as_text(tinylm.instructions(120, seed=7))}
with accelerator.main_process_first():
    tokenized = {k: d.map(tokenize_function, batched=True, remove_columns=["text"]) for k, d in raw.items()}
    lm_datasets = {k: d.map(group_texts, batched=True) for k, d in tokenized.items()}

train_dataloader = DataLoader(
    lm_datasets["train"], shuffle=True, collate_fn=default_data_collator, batch_size=16
)
eval_dataloader = DataLoader(lm_datasets["validation"], collate_fn=default_data_collator, batch_size=16)

no_decay = ["bias", "norm.weight"]
optimizer_grouped_parameters = [
    {
        "params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
        "weight_decay": 0.01,
    },
    {
        "params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
        "weight_decay": 0.0,
    },
]
optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=args.learning_rate)
max_train_steps = args.num_train_epochs * len(train_dataloader)
lr_scheduler = get_scheduler(
    name="linear", optimizer=optimizer, num_warmup_steps=10, num_training_steps=max_train_steps
)
model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
    model, optimizer, train_dataloader, eval_dataloader, lr_scheduler
)


def forward(batch):
    if args.bug == "pre-shifted-labels":
        # "the target of position t is the token at t + 1"
        return model(
            input_ids=batch["input_ids"][:, :-1],
            attention_mask=batch["attention_mask"][:, :-1],
            labels=batch["labels"][:, 1:],
        )
    return model(**batch)


completed_steps = 0
for epoch in range(args.num_train_epochs):
    model.train()
    total_loss = 0.0
    for batch in train_dataloader:
        outputs = forward(batch)
        loss = outputs.loss
        total_loss += loss.detach().float()
        accelerator.backward(loss)
        optimizer.step()
        lr_scheduler.step()
        optimizer.zero_grad()
        completed_steps += 1

    model.eval()
    losses = []
    for batch in eval_dataloader:
        with torch.no_grad():
            outputs = forward(batch)
        losses.append(accelerator.gather_for_metrics(outputs.loss.repeat(16)))
    eval_loss = torch.mean(torch.cat(losses))
    perplexity = math.exp(eval_loss)
    train_loss = total_loss.item() / len(train_dataloader)
    accelerator.print(
        f"epoch {epoch}: perplexity: {perplexity:.3f} eval_loss: {eval_loss:.4f} train_loss: {train_loss:.4f}"
    )

model = accelerator.unwrap_model(model)
question = [{"role": "user", "content": "What is two plus three?"}]
inputs = tokenizer.apply_chat_template(
    question, add_generation_prompt=True, return_tensors="pt", return_dict=True
)
output = model.generate(**inputs, max_new_tokens=12, do_sample=False, pad_token_id=tokenizer.eos_token_id)
accelerator.print(repr(tokenizer.decode(output[0][inputs["input_ids"].shape[1] :])))
