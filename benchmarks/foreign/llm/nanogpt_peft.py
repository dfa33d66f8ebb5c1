"""LoRA on a GPT of the user's own, the way PEFT's "Custom models" guide applies it: a
nanoGPT-style module (`CausalSelfAttention` with `c_attn`/`c_proj`, an MLP with
`c_fc`/`c_proj`, `Block`s, an untied `lm_head`), then `get_peft_model(model,
LoraConfig(target_modules=[...], modules_to_save=["lm_head"]))`, trained by nanoGPT's loop
(`get_batch`, AdamW, gradient clipping at 1.0, the loss printed every 20 iterations). To save
memory each block runs under activation checkpointing (`torch.utils.checkpoint.checkpoint`),
as nanoGPT forks and LLM recipes do.

The text is tinylm's chat turns tokenized with tinylm's tokenizer (examples/llm/tinylm.py,
made once under the system temp folder); the GPT stands for a checkpoint of the user's own.
Healthy as written (`use_reentrant=False`, the form PyTorch recommends): the adapters and the
head train together and the loss falls from about 6.2 to 0.75.

`--bug reentrant-checkpoint`: the blocks are checkpointed with `use_reentrant=True` (the
default of older PyTorch and of many snippets). The embeddings are frozen by PEFT, so the
hidden states entering the checkpointed blocks do not require grad; the reentrant
implementation then returns outputs without a graph through the block, PyTorch prints
"None of the inputs have requires_grad=True. Gradients will be None" once, and every LoRA
adapter gets no gradient: every `lora_B` stays exactly zero all run. The head in
`modules_to_save` still trains, so the loss falls (to about 1.2: the head alone) and the
run looks fine (TOR012 adapters-not-learning). transformers models guard against this with
`enable_input_require_grads()`; a module of the user's own does not.
"""

import argparse
import math
import sys
from pathlib import Path

from peft import LoraConfig, get_peft_model
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint
from transformers import AutoTokenizer

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["reentrant-checkpoint"], default=None)
parser.add_argument("--max_iters", type=int, default=160)
args = parser.parse_args()

# -- the tokenizer: tinylm's, made once under the temp folder ------------------------------
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "llm"))
import tinylm  # noqa: E402

MODEL = tinylm.cached()  # made once, shared by parallel runs
# ------------------------------------------------------------------------------------------

torch.manual_seed(1337)
tokenizer = AutoTokenizer.from_pretrained(MODEL)
block_size, batch_size = 64, 16
n_layer, n_head, n_embd = 2, 4, 64


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(n_embd, dim=2)
        q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size, gradient_checkpointing=True, use_reentrant=False):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([Block() for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.gradient_checkpointing = gradient_checkpointing
        self.use_reentrant = use_reentrant

    def forward(self, idx, targets=None):
        pos = torch.arange(idx.size(1), device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            if self.gradient_checkpointing and self.training:
                x = checkpoint(block, x, use_reentrant=self.use_reentrant)
            else:
                x = block(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


# the data: the chat turns as one token stream, nanoGPT's train.bin / val.bin
def encode(rows):
    chats = [
        [{"role": "user", "content": r["prompt"]}, {"role": "assistant", "content": r["completion"]}]
        for r in rows
    ]
    text = "".join(tokenizer.apply_chat_template(c, tokenize=False) for c in chats)
    return torch.tensor(tokenizer(text)["input_ids"])


train_data, val_data = encode(tinylm.instructions(1500)), encode(tinylm.instructions(150, seed=7))


def get_batch(split):
    data = train_data if split == "train" else val_data
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i : i + block_size] for i in ix])
    y = torch.stack([data[i + 1 : i + 1 + block_size] for i in ix])
    return x, y


model = GPT(len(tokenizer), use_reentrant=args.bug == "reentrant-checkpoint")
config = LoraConfig(
    r=8,
    lora_alpha=16,
    lora_dropout=0.0,
    target_modules=["c_attn", "c_proj", "c_fc"],
    modules_to_save=["lm_head"],
)
model = get_peft_model(model, config)
model.print_trainable_parameters()

optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2, weight_decay=0.0)


@torch.no_grad()
def estimate_loss():
    model.eval()
    out = {}
    for split in ("train", "val"):
        losses = torch.stack([model(*get_batch(split))[1] for _ in range(5)])
        out[split] = losses.mean().item()
    model.train()
    return out


model.train()
for it in range(args.max_iters + 1):
    lr = 1e-2 * min(1.0, (it + 1) / 10) * 0.5 * (1 + math.cos(math.pi * it / args.max_iters))
    for group in optimizer.param_groups:
        group["lr"] = lr
    if it % 40 == 0:
        losses = estimate_loss()
        print(f"step {it}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
    X, Y = get_batch("train")
    logits, loss = model(X, Y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if it % 20 == 0:
        print(f"iter {it}: loss {loss.item():.4f}")

lora_b = [p.abs().max().item() for n, p in model.named_parameters() if "lora_B" in n]
print(f"largest |lora_B| entry over {len(lora_b)} adapters: {max(lora_b):.3g}")
