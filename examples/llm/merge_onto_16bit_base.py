"""A LoRA adapter trained at a preference-tuning learning rate, merged onto its base (TOR015
`merge-rounded` when the base is 16-bit), with PEFT on tinylm.

    python examples/llm/merge_onto_16bit_base.py                      # healthy: float32 base
    python examples/llm/merge_onto_16bit_base.py --bug bfloat16-base  # the base loaded in bfloat16
    python examples/llm/merge_onto_16bit_base.py --base-dtype float16  # quiet: keeps 56%
    python examples/llm/merge_onto_16bit_base.py --bug bfloat16-base --lr 2e-4  # healthy: SFT's rate

The adapter (r=8, lora_alpha=16 on q_proj and v_proj) trains 30 AdamW steps in float32 on
tinylm's instruction data at `--lr` (default 1e-6, TRL's `DPOConfig` and `GRPOConfig` default),
and is saved. The script then serves it as a merged model, as users do: the base reloaded
(`torch_dtype` float32; bfloat16 with `--bug`; any with `--base-dtype`), `PeftModel.from_pretrained(base,
adapter).merge_and_unload()`. A 16-bit base keeps a weight change only where it is at least
half a unit in the last place of the weight: at 1e-6 the adapter's change is smaller, and the
merge writes back the base. The script prints the share of the adapter's weight change that
the merged weights hold, measured on every LoRA layer.
"""

import argparse
import sys
import tempfile
from pathlib import Path

from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["bfloat16-base"], default=None)
parser.add_argument("--base-dtype", choices=["float32", "bfloat16", "float16"], default=None)
parser.add_argument("--lr", type=float, default=1e-6)
args = parser.parse_args()

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tinylm  # noqa: E402

MODEL = tinylm.cached()
torch.manual_seed(0)
tokenizer = AutoTokenizer.from_pretrained(MODEL)
texts = [f"{row['prompt']} {row['completion']}" for row in tinylm.instructions(64)]
ids = [tokenizer(text)["input_ids"][:24] for text in texts]

model = get_peft_model(
    AutoModelForCausalLM.from_pretrained(MODEL),
    LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], lora_dropout=0.0),
)
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr)
for step in range(30):
    rows = [ids[(step * 8 + i) % len(ids)] for i in range(8)]
    shortest = min(len(r) for r in rows)
    batch = torch.tensor([r[:shortest] for r in rows])
    model(input_ids=batch, labels=batch).loss.backward()
    optimizer.step()
    optimizer.zero_grad()

dtype = getattr(torch, args.base_dtype or ("bfloat16" if args.bug else "float32"))
with tempfile.TemporaryDirectory() as folder:
    model.save_pretrained(folder)
    served = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(MODEL, dtype=dtype), folder)
    layers = [m for m in served.modules() if hasattr(m, "get_delta_weight") and "default" in m.lora_A]
    before = [
        (m.get_base_layer(), m.get_base_layer().weight.float().clone(), m.get_delta_weight("default").float())
        for m in layers
    ]
    merged = served.merge_and_unload()
missing = sum(float((base.weight.float() - w0 - delta).pow(2).sum()) for base, w0, delta in before)
change = sum(float(delta.pow(2).sum()) for _, _, delta in before)
print(
    f"base {str(dtype).removeprefix('torch.')}, lr {args.lr:g}: the merged weights hold "
    f"{100 * (1 - min(1.0, (missing / change) ** 0.5)):.0f}% of the adapter's weight change"
)
