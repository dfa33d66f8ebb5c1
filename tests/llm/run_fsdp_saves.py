"""FSDP2 saves of tests/llm/test_fsdp_saves.py: two ranks under torchrun (gloo, CPU).

    torchrun --nproc-per-node 2 run_fsdp_saves.py TINYLM_DIR OUT_DIR

tinylm under LoRA, each decoder layer and the whole model wrapped in `fully_shard` (FSDP2;
FSDP1's FullyShardedDataParallel refuses a CPU-only machine), trains 3 steps. Rank 0 then saves
what users save without gathering, the state dicts of DTensor shards: PEFT's
`get_peft_model_state_dict(model)` and `model.state_dict()`; and, gathered on both ranks with
`get_model_state_dict(..., StateDictOptions(full_state_dict=True, cpu_offload=True))`, the same
two whole.
"""

import sys
from pathlib import Path

import torch.distributed as dist
from peft import LoraConfig, get_peft_model, get_peft_model_state_dict
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from transformers import AutoModelForCausalLM

import torch

TINYLM, OUT = Path(sys.argv[1]), Path(sys.argv[2])

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])
model = get_peft_model(AutoModelForCausalLM.from_pretrained(TINYLM), config)
mesh = init_device_mesh("cpu", (dist.get_world_size(),))
for layer in model.base_model.model.model.layers:
    fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
generator = torch.Generator().manual_seed(rank)
for _ in range(3):
    ids = torch.randint(3, 200, (2, 12), generator=generator)
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    optimizer.zero_grad()

full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
if rank == 0:
    OUT.mkdir(parents=True, exist_ok=True)
    torch.save(get_peft_model_state_dict(model), OUT / "adapter-sharded.pt")  # shards
    torch.save(model.state_dict(), OUT / "model-sharded.pt")  # shards
    torch.save(get_peft_model_state_dict(model, state_dict=full), OUT / "adapter-full.pt")
    torch.save(full, OUT / "model-full.pt")
dist.barrier()
dist.destroy_process_group()
print("saved", flush=True)
