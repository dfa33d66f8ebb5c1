"""Supervised fine-tuning with TRL's `SFTTrainer` as its quickstart writes it: a conversational
data set (`messages`), an `SFTConfig`, the trainer given the model and its tokenizer, evaluation
on a held-out split, then a quick generation with the chat template.

The "Hub checkpoint" is tinylm (examples/llm/tinylm.py: a 2-layer Llama with a ChatML
tokenizer, made offline once under the system temp folder); the data is tinylm's synthetic
arithmetic and word tasks. Full fine-tuning at 3e-3 (a 2-layer model takes a larger rate than
the 2e-5 of a billion-parameter one) for 3 epochs: the loss falls from about 6 to 0.5 and the
model answers in the task's format, ending with `<|im_end|>`.

Healthy as written. The bugs:
- `max-length-cuts`: `max_length=20`, copied from a config for shorter examples; the chat
  renderings are 23-29 tokens, of which the prompt takes 17-20, so every assistant reply loses
  its end and its `<|im_end|>` (a third of them the whole reply). TRL truncates without a
  word; the loss falls as in the healthy run (the prompts and the answers' first words are
  learned) and the model has never seen a whole answer: asked "What is two plus three?" it
  replies "two plus zero?<|im_end|>" (DAT017 completion-truncated);
- `eval-is-train`: 200 rows repeated three times ("more epochs of the small set") before
  `train_test_split`, so nearly every evaluation row is also a training row: the eval loss
  ends at 0.51, below the training loss (0.55), where the held-out one of the healthy run
  ends at 0.81 (TRN009 eval-set-is-train);
- `full-ft-lora-lr`: a learning rate meant for LoRA, whose adapters start at zero and take
  rates 10-100x those of full fine-tuning, used to fine-tune every weight, constant, with no
  warm-up. On a billion-parameter checkpoint 2e-4 already does this; this 2-layer random model
  still learns at 10x its rate (3e-2 trains fine), so the mistake is scaled to what breaks it
  the same way: 2.0. The clipped updates throw the weights about; the loss climbs from 6 to
  90-250 within the first 10 steps and stays above 100 for all 3 epochs (TRN002
  loss-divergence), and the model answers with one word repeated.
"""

import argparse
import sys
import tempfile
from pathlib import Path

from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["max-length-cuts", "eval-is-train", "full-ft-lora-lr"], default=None)
parser.add_argument("--out", default=None, help="output_dir (default: a fresh temporary folder)")
args = parser.parse_args()

# -- the stand-in for a Hub checkpoint: tinylm, made once under the temp folder -----------
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "llm"))
import tinylm  # noqa: E402

MODEL = tinylm.cached()  # made once, shared by parallel runs
# ------------------------------------------------------------------------------------------

tokenizer = AutoTokenizer.from_pretrained(MODEL)
model = AutoModelForCausalLM.from_pretrained(MODEL)

rows = tinylm.conversations(600)
if args.bug == "eval-is-train":
    dataset = Dataset.from_list(tinylm.conversations(200) * 3).train_test_split(test_size=0.1, seed=0)
    train_dataset, eval_dataset = dataset["train"], dataset["test"]
else:
    # a held-out split: evaluation conversations that never occur in the training rows
    train_dataset = Dataset.from_list(rows)
    seen = {str(r["messages"]) for r in rows}
    held_out = [r for r in tinylm.conversations(400, seed=7) if str(r["messages"]) not in seen]
    eval_dataset = Dataset.from_list(held_out[:64])

training_args = SFTConfig(
    output_dir=args.out or tempfile.mkdtemp(prefix="trl-sft-"),
    max_length=20 if args.bug == "max-length-cuts" else 128,
    num_train_epochs=3,
    per_device_train_batch_size=16,
    per_device_eval_batch_size=32,
    learning_rate=2.0 if args.bug == "full-ft-lora-lr" else 3e-3,
    lr_scheduler_type="constant" if args.bug == "full-ft-lora-lr" else "linear",
    warmup_steps=0 if args.bug == "full-ft-lora-lr" else 4,
    logging_steps=5,
    eval_strategy="epoch",
    save_strategy="no",
    report_to="none",
    use_cpu=True,
    disable_tqdm=True,
    seed=0,
)
trainer = SFTTrainer(
    model=model,
    args=training_args,
    train_dataset=train_dataset,
    eval_dataset=eval_dataset,
    processing_class=tokenizer,
)
trainer.train()
print(trainer.evaluate())

# a quick check, as the quickstart ends: answer one question with the chat template
question = [{"role": "user", "content": "What is two plus three?"}]
inputs = tokenizer.apply_chat_template(
    question, add_generation_prompt=True, return_tensors="pt", return_dict=True
)
output = trainer.model.generate(
    **inputs, max_new_tokens=16, do_sample=False, pad_token_id=tokenizer.pad_token_id
)
print(repr(tokenizer.decode(output[0][inputs["input_ids"].shape[1] :])))
