"""What the fine-tuning watches (`trainmedic.llm`) add to a language model's training step.

Three roles train the tiny chat model of `examples/llm/tinylm.py` (2-layer Llama, random
weights) on the same padded chat batches with `labels` (prompt masked to -100, as SFT does),
AdamW, on the CPU:

- `bare`: no trainmedic;
- `guard`: `trainmedic.torch.guard(model, optimizer)`, the fine-tuning watches included (they
  attach to a transformers model on the first checked step);
- `guard-no-llm`: the same guard with `trainmedic.llm.attach` switched off: the PyTorch
  guard alone.

Each role runs in its own process, the roles taking turns for `--rounds` rounds (the
machine's drift hits them alike); a process times `--steps` steps after `--warmup`. The
figures are the median step time of each role and the ratios guard / guard-no-llm (what the
fine-tuning watches cost) and guard / bare (the whole guard), side by side in one run.

    python benchmarks/llm_guard_overhead.py [--rounds 7] [--steps 150] [--batch 16] [--length 96]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROLES = ("bare", "guard", "guard-no-llm")


def train(model_dir: str, role: str, steps: int, warmup: int, batch: int, length: int) -> list[float]:
    """One process's step times (seconds) after the warm-up."""
    import time

    from transformers import AutoModelForCausalLM, AutoTokenizer

    import torch

    sys.path.insert(0, str(ROOT / "examples" / "llm"))
    import tinylm

    torch.manual_seed(0)
    torch.set_num_threads(1)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    if role != "bare":
        import trainmedic.llm
        import trainmedic.torch

        if role == "guard-no-llm":
            trainmedic.llm.attach = lambda *args, **kwargs: None  # type: ignore[assignment]
        trainmedic.torch.guard(model, optimizer)
    batches = []
    rows = tinylm.conversations(batch * 8, seed=3)
    for start in range(0, len(rows), batch):
        ids, labels = [], []
        for row in rows[start : start + batch]:
            text = tokenizer.apply_chat_template(
                row["messages"][:1], tokenize=False, add_generation_prompt=True
            )
            prompt = tokenizer(text)["input_ids"]
            full = tokenizer(tokenizer.apply_chat_template(row["messages"], tokenize=False))["input_ids"]
            full = (full + [tokenizer.eos_token_id] * length)[:length]
            ids.append(full)
            labels.append([-100] * len(prompt) + full[len(prompt) :])
        batches.append((torch.tensor(ids), torch.tensor(labels)))
    model.train()
    times = []
    for step in range(warmup + steps):
        input_ids, labels = batches[step % len(batches)]
        started = time.perf_counter()
        loss = model(input_ids=input_ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step >= warmup:
            times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--length", type=int, default=96)
    parser.add_argument("--child", nargs=2, metavar=("MODEL_DIR", "ROLE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        times = train(args.child[0], args.child[1], args.steps, args.warmup, args.batch, args.length)
        print(json.dumps(statistics.median(times)))
        return
    sys.path.insert(0, str(ROOT / "examples" / "llm"))
    import tinylm

    model_dir = str(tinylm.cached())
    medians: dict[str, list[float]] = {role: [] for role in ROLES}
    for _ in range(args.rounds):
        for role in ROLES:
            cmd = [sys.executable, __file__, "--child", model_dir, role]
            cmd += ["--steps", str(args.steps), "--warmup", str(args.warmup)]
            cmd += ["--batch", str(args.batch), "--length", str(args.length)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT)
            medians[role].append(json.loads(out.stdout.strip().splitlines()[-1]))
    step = {role: statistics.median(values) for role, values in medians.items()}
    for role in ROLES:
        print(f"{role:>13}: median step {step[role] * 1000:.2f} ms over {args.rounds} rounds")
    watches = [g / n for g, n in zip(medians["guard"], medians["guard-no-llm"], strict=True)]
    whole = [g / b for g, b in zip(medians["guard"], medians["bare"], strict=True)]
    print(
        f"fine-tuning watches (guard / guard-no-llm): {statistics.median(watches):.3f} "
        f"(rounds {min(watches):.3f}-{max(watches):.3f})"
    )
    print(
        f"whole guard (guard / bare): {statistics.median(whole):.3f} "
        f"(rounds {min(whole):.3f}-{max(whole):.3f})"
    )


if __name__ == "__main__":
    main()
