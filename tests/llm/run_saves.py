"""Saves of the tests/llm/test_saves.py cases, in one process under the boot module.

    python run_saves.py TINYLM_DIR OUT_DIR

Each case saves under OUT_DIR/<case>; the save checks observe at the end of the process, each
observation naming its path. tinylm's classifier (`score`) and causal LM under LoRA train a few
steps on token ids made here.
"""

import sys
from pathlib import Path

from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

import torch
from torch import nn

TINYLM, OUT = Path(sys.argv[1]), Path(sys.argv[2])
LORA = {"r": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}


def train(model, steps=3, classify=False, optimizer=None):
    optimizer = optimizer or torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    generator = torch.Generator().manual_seed(1)
    for _ in range(steps):
        ids = torch.randint(3, 200, (4, 12), generator=generator)
        if classify:
            loss = model(input_ids=ids, labels=torch.tensor([0, 1, 0, 1])).loss
        else:
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


def classifier(modules_to_save):
    base = AutoModelForSequenceClassification.from_pretrained(TINYLM, num_labels=2)
    base.config.pad_token_id = 0
    return get_peft_model(base, LoraConfig(**LORA, modules_to_save=modules_to_save))


torch.manual_seed(0)
# The head outside the adapter (no task_type, no modules_to_save): the adapter reloads onto a
# fresh random `score`. Its twin lists the head in modules_to_save.
for case, modules in (("head-lost", None), ("head-saved", ["score"])):
    model = classifier(modules)
    train(model, classify=True)
    model.save_pretrained(OUT / case)

# Training goes on the moment a save returns: one large optimizer step changes every adapter
# weight. The check compares the reload with the model as it was saved (quiet), and its probe
# runs when the script has ended, not while it trains: the script's own forward hook sees none.
go_on = get_peft_model(AutoModelForCausalLM.from_pretrained(TINYLM), LoraConfig(**LORA))
train(go_on)
calls = []
go_on.register_forward_hook(lambda module, args, output: calls.append(module))  # the copy's too
go_on.save_pretrained(OUT / "trained-on")
in_save = len(calls)
train(go_on, steps=1, optimizer=torch.optim.SGD([p for p in go_on.parameters() if p.requires_grad], lr=10.0))

# An adapter saved before it trained: every lora_B is PEFT's initial zero.
lm = get_peft_model(AutoModelForCausalLM.from_pretrained(TINYLM), LoraConfig(**LORA))
lm.save_pretrained(OUT / "before-training")
tokenizer = AutoTokenizer.from_pretrained(TINYLM)
text = tokenizer.apply_chat_template([{"role": "user", "content": "What is 3 plus 4?"}], tokenize=False)
train(lm)
# The chat model saved without its tokenizer, then with it.
lm.save_pretrained(OUT / "no-tokenizer")
lm.save_pretrained(OUT / "with-tokenizer")
tokenizer.save_pretrained(OUT / "with-tokenizer")
keys = [k for k in lm.state_dict() if "lora_" in k]
# A merge of a float32 adapter onto its float32 base: the same function.
merged = lm.merge_and_unload()

# An adapter trained at the learning rate of TRL's DPO and GRPO (1e-6): its weight change is
# below bfloat16's resolution of the base weights. Merged onto the base loaded in bfloat16, W + BA
# rounds back to W; onto the float32 base, it is all there. The adapter trained above at a
# large rate, merged onto the bfloat16 base, keeps its change (a few % rounded): quiet.
slow = get_peft_model(AutoModelForCausalLM.from_pretrained(TINYLM), LoraConfig(**LORA))
train(slow, steps=30, optimizer=torch.optim.AdamW([p for p in slow.parameters() if p.requires_grad], lr=1e-6))
slow.save_pretrained(OUT / "dpo-rate")
tokenizer.save_pretrained(OUT / "dpo-rate")
for adapter, dtype in (
    ("dpo-rate", torch.bfloat16),
    ("dpo-rate", torch.float32),
    ("with-tokenizer", torch.bfloat16),
):
    base = AutoModelForCausalLM.from_pretrained(TINYLM, dtype=dtype)
    PeftModel.from_pretrained(base, OUT / adapter).merge_and_unload()  # merge: adapter onto base

# A plain state dict of a model of the user's own: right, quiet.
mlp = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
torch.save(mlp.state_dict(), OUT / "mlp.pt")
# SYNTHETIC: the file a ZeRO-3 / FSDP save without gathering writes (each parameter an empty
# placeholder); DeepSpeed and FSDP do not run on this CPU-only machine.
torch.save({k: torch.empty(0) for k in keys}, OUT / "zero3-adapter.pt")
# Tied embeddings: a causal LM trained from its config with tie_word_embeddings=True, its
# lm_head.weight the very tensor of model.embed_tokens.weight. The script sets the config's flag to
# False to train the head apart, but the two names are still one tensor: save_pretrained writes it
# once (as model.embed_tokens.weight), and from_pretrained, told not to tie, initializes
# lm_head.weight at random. Its twin keeps the flag: reloaded tied, quiet.
for case, keep_tied in (("untied-by-config", False), ("tied", True)):
    tied = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(TINYLM, tie_word_embeddings=True))
    tied.config.tie_word_embeddings = keep_tied
    train(tied)
    tied.save_pretrained(OUT / case)
    tokenizer.save_pretrained(OUT / case)  # a chat template was rendered above

print(f"forwards in the save call: {in_save}", flush=True)
print(f"forwards of the copy while the script ran: {sum(m is not go_on for m in calls)}", flush=True)
print("saved", flush=True)
