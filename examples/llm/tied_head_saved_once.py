"""A causal LM trained with its output head tied to its input embeddings, saved with a config
that says they are not tied (TOR015), with transformers on tinylm.

    python examples/llm/tied_head_saved_once.py                       # healthy
    python examples/llm/tied_head_saved_once.py --bug untied-by-config

The model is built from tinylm's config with `tie_word_embeddings=True` (pre-training from
scratch, as small models such as Gemma, Qwen2-0.5B and SmolLM tie their head): `lm_head.weight`
is the very tensor of `model.embed_tokens.weight`. It trains 30 AdamW steps on tinylm's
instruction text, is saved with `save_pretrained`, and reloaded with `from_pretrained`.

`--bug untied-by-config`: the script sets `model.config.tie_word_embeddings = False` after
building the model, meaning to train the head apart. The flag unties nothing in memory: the two
names are still one tensor, which trains. `save_pretrained` writes that tensor once, as
`model.embed_tokens.weight` (the name of the pair that transformers' `_tied_weights_keys` does not
list), and `from_pretrained`, told by the saved config not to tie, reports `lm_head.weight`
missing and initializes it at random. The script prints the loss of the model in memory and of
the reloaded one on held-out text.
"""

import argparse
import sys
import tempfile
from pathlib import Path

from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["untied-by-config"], default=None)
args = parser.parse_args()

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tinylm  # noqa: E402

MODEL = tinylm.cached()  # the stand-in for a Hub checkpoint, made once under the temp folder
torch.manual_seed(0)
tokenizer = AutoTokenizer.from_pretrained(MODEL)
tokenizer.pad_token = "<|endoftext|>"
texts = [f"{r['prompt']} {r['completion']}" for r in tinylm.instructions(160)]
train_texts, held_out = texts[:128], texts[128:]

model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(MODEL, tie_word_embeddings=True))
if args.bug == "untied-by-config":
    model.config.tie_word_embeddings = False  # the head stays the embedding's tensor


def batch(rows):
    encoded = tokenizer(rows, padding=True, truncation=True, max_length=32, return_tensors="pt")
    labels = encoded["input_ids"].masked_fill(encoded["attention_mask"] == 0, -100)
    return {**encoded, "labels": labels}


def loss(model):
    model.eval()
    with torch.no_grad():
        return model(**batch(held_out)).loss.item()


optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
for step in range(30):
    start = (step * 16) % len(train_texts)
    model.train()
    model(**batch(train_texts[start : start + 16])).loss.backward()
    optimizer.step()
    optimizer.zero_grad()
out = tempfile.mkdtemp(prefix="tied-")  # kept: the saved model is the script's result
model.save_pretrained(out)
print(f"held-out loss in memory {loss(model):.2f}")
reloaded = AutoModelForCausalLM.from_pretrained(out)
print(f"held-out loss reloaded from {out} {loss(reloaded):.2f}")
