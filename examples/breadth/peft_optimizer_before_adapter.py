"""PEFT/LoRA on a tiny model: the optimizer is built before `get_peft_model`, so the adapter never trains.

Run: trainmedic run -- python examples/breadth/peft_optimizer_before_adapter.py
PEFT freezes the base model's parameters; the optimizer made from them holds only frozen
tensors and the LoRA matrices are in no optimizer: the loss stays flat, nothing fails.
trainmedic: TOR001 naming the adapter's tensors. FIXED=1 builds the optimizer afterwards.
"""

import os

from peft import LoraConfig, get_peft_model

import torch
from torch import nn

torch.manual_seed(0)
base = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))  # random init: no download
x = torch.randn(256, 8)
y = (x.sum(1) > 0).long()
config = LoraConfig(r=4, lora_alpha=8, target_modules=["0", "2"])
if os.environ.get("FIXED") == "1":
    model = get_peft_model(base, config)
    optimizer = torch.optim.AdamW((p for p in model.parameters() if p.requires_grad), lr=1e-2)
else:
    optimizer = torch.optim.AdamW(base.parameters(), lr=1e-2)  # the bug: before the adapter exists
    model = get_peft_model(base, config)
for epoch in range(3):
    for i in range(0, 256, 32):
        loss = nn.functional.cross_entropy(model(x[i : i + 32]), y[i : i + 32])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"Epoch {epoch + 1}/3 loss {loss.item():.4f}", flush=True)
