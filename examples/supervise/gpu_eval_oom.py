"""A PyTorch loop on a CUDA GPU whose epoch-end evaluation keeps every output on the device.

Training holds a steady working set (a model and its activations, about 5 % of the card);
the evaluation of epoch k keeps k x 40 % of the card in outputs (like a callback that
gathers every logit on the GPU to compute mAP), so it runs out of accelerator memory in
the evaluation of epoch 3 on any card size:

    trainmedic run -- python examples/supervise/gpu_eval_oom.py

Expected diagnosis: `accelerator-oom` during evaluation of epoch 3 (with the tree's peak
GPU memory from NVML) and `eval-memory-spike` on GPU memory. Needs a CUDA GPU.
"""

import argparse
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--step-s", type=float, default=0.05)
    parser.add_argument("--eval-share", type=float, default=0.4, help="card share kept per epoch number")
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        sys.exit("gpu_eval_oom.py needs a CUDA GPU (torch.cuda.is_available() is False)")
    torch.manual_seed(0)
    device = torch.device("cuda")
    capacity = torch.cuda.get_device_properties(device).total_memory
    width = 4096
    model = torch.nn.Linear(width, width, device=device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    # the rest of the training working set (about 5 % of the card)
    ballast = torch.ones(int(capacity * 0.05) // 4, device=device)
    chunk_floats = int(capacity * 0.02) // 4  # one evaluation batch's outputs: 2 % of the card

    for epoch in range(1, args.epochs + 1):
        print(f"Epoch {epoch}/{args.epochs}", flush=True)
        for _ in range(args.steps):
            x = torch.randn(512, width, device=device)
            loss = model(x).square().mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            time.sleep(args.step_s)
        print(f"Evaluating epoch {epoch} ...", flush=True)
        outputs = []
        with torch.no_grad():
            for _ in range(int(epoch * args.eval_share / 0.02)):
                outputs.append(torch.ones(chunk_floats, device=device))  # kept on the GPU
                time.sleep(0.03)
        score = float(sum(o[0] for o in outputs))
        del outputs
        # hand the cached blocks back, as evaluation helpers often do: the card then shows
        # the training working set again (NVML sees what PyTorch's allocator reserved)
        torch.cuda.empty_cache()
        print(f"epoch {epoch}: loss {loss.item():.4f} val_score {score:.1f} ballast {ballast[0].item():.0f}")
    print("done")


if __name__ == "__main__":
    main()
