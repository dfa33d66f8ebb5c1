"""Train with TRL's `SFTTrainer` on a language-modeling data set (`text`) written by a
formatting function that renders each prompt/completion example as one text, then serve the
model the way chat models are served: prompts rendered with
`tokenizer.apply_chat_template(..., add_generation_prompt=True)` and `generate`, here on a few
questions of the tasks, scored for exact answers.

The "Hub checkpoint" is tinylm (examples/llm/tinylm.py: a ChatML chat template, made once
under the system temp folder); the rows are its synthetic prompt/completion tasks. Healthy as
written: the formatting function renders each example with the tokenizer's own chat template,
the text the served prompts continue; the model answers in the trained format.

`--bug alpaca-train-chatml-serve`: the formatting function of the Alpaca / alpaca-lora
recipes (`### Instruction:\\n...\\n\\n### Response:\\n...`), while serving still goes through
`apply_chat_template`. Training goes well (the loss falls as in the healthy run); at serving
the model meets `<|im_start|>user ... <|im_start|>assistant` markers it never saw in training
and answers with fragments of the Alpaca layout or nothing useful (DAT016
chat-template-mismatch).
"""

import argparse
import sys
import tempfile
from pathlib import Path

from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["alpaca-train-chatml-serve"], default=None)
parser.add_argument("--out", default=None, help="output_dir (default: a fresh temporary folder)")
args = parser.parse_args()

# -- the stand-in for a Hub checkpoint: tinylm, made once under the temp folder -----------
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "llm"))
import tinylm  # noqa: E402

MODEL = tinylm.cached()  # made once, shared by parallel runs
# ------------------------------------------------------------------------------------------

tokenizer = AutoTokenizer.from_pretrained(MODEL)
model = AutoModelForCausalLM.from_pretrained(MODEL)


def alpaca_format(example):
    return f"### Instruction:\n{example['prompt']}\n\n### Response:\n{example['completion']}"


def chat_format(example):
    messages = [
        {"role": "user", "content": example["prompt"]},
        {"role": "assistant", "content": example["completion"]},
    ]
    return tokenizer.apply_chat_template(messages, tokenize=False)


train_rows = tinylm.instructions(600)
test_rows = tinylm.instructions(8, seed=11)  # questions users will ask
format_example = alpaca_format if args.bug == "alpaca-train-chatml-serve" else chat_format
dataset = Dataset.from_list([{"text": format_example(r)} for r in train_rows])

training_args = SFTConfig(
    output_dir=args.out or tempfile.mkdtemp(prefix="sft-serve-"),
    max_length=128,
    num_train_epochs=3,
    per_device_train_batch_size=16,
    learning_rate=3e-3,
    warmup_steps=4,
    logging_steps=10,
    save_strategy="no",
    report_to="none",
    use_cpu=True,
    disable_tqdm=True,
    seed=0,
)
trainer = SFTTrainer(
    model=model,
    args=training_args,
    train_dataset=dataset,
    processing_class=tokenizer,
)
trainer.train()

# serving: the chat template renders each question, the model answers
model = trainer.model.eval()
correct = 0
for row in test_rows:
    messages = [{"role": "user", "content": row["prompt"]}]
    inputs = tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    output = model.generate(**inputs, max_new_tokens=20, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    answer = tokenizer.decode(output[0][inputs["input_ids"].shape[1] :], skip_special_tokens=True).strip()
    correct += answer == row["completion"]
    print(f"{row['prompt']!r} -> {answer!r}")
print(f"exact answers: {correct}/{len(test_rows)}")
