"""What the check of `merge_and_unload` (`trainmedic.torch._save_probe.merge_probe` and
`_merge_weights`) costs the merge call: the call's time under the guard and bare, interleaved.

A LoRA adapter (r=8, q/v projections) on tinylm, trained 30 AdamW steps at 1e-6 and saved once;
each round loads the base in bfloat16 and the adapter (`PeftModel.from_pretrained`, untimed) and
times `merge_and_unload()`, alternately without the guard and inside `trainmedic.torch.guard()`.
The figures are medians of the call's wall time and of the calling thread's CPU time (which a
loaded machine's scheduling does not inflate).

    python benchmarks/merge_check_cost.py --rounds 8
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "llm"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    import tinylm
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM

    import trainmedic.torch as tm

    torch.set_num_threads(1)
    model_dir = tinylm.cached()
    torch.manual_seed(0)
    lora = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"])
    adapter = get_peft_model(AutoModelForCausalLM.from_pretrained(model_dir), lora)
    optimizer = torch.optim.AdamW([p for p in adapter.parameters() if p.requires_grad], lr=1e-6)
    ids = torch.randint(3, 200, (4, 12), generator=torch.Generator().manual_seed(1))
    for _ in range(30):
        adapter(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    folder = tempfile.mkdtemp(prefix="merge-cost-")
    adapter.save_pretrained(folder)

    def once(checked: bool) -> tuple[float, float]:
        base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
        served = PeftModel.from_pretrained(base, folder)
        with tm.guard() if checked else contextlib.nullcontext():
            start, start_cpu = time.perf_counter(), time.thread_time()
            served.merge_and_unload()
            return time.perf_counter() - start, time.thread_time() - start_cpu

    once(False), once(True)  # warm-up: first calls load kernels
    bare, checked = [], []
    for _ in range(args.rounds):
        bare.append(once(False))
        checked.append(once(True))
    for name, rounds in (("bare", bare), ("checked", checked)):
        wall = statistics.median(r[0] for r in rounds) * 1e3
        cpu = statistics.median(r[1] for r in rounds) * 1e3
        print(f"merge_and_unload {name}: {wall:.1f} ms wall, {cpu:.1f} ms CPU")


if __name__ == "__main__":
    main()
