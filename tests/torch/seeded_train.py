"""A seeded training run whose final weights must not depend on trainmedic watching it.

argv: OUTPUT_FILE [guard] [manual]. Writes the SHA-256 of the final weights and the
label order the loader produced. Dropout, a shuffled loader with two worker processes,
random augmentation and a scheduler all draw from the global generators. `manual`
updates the parameters by hand (`p.data.add_` after clipping, no torch.optim), so
each backward() is the step the guard watches.
"""

import hashlib
import sys

from torch.utils.data import DataLoader, TensorDataset

import torch
from torch import nn


def main(out, use_guard, manual=False):
    torch.manual_seed(7)
    x = torch.randn(256, 16)
    y = torch.randint(0, 3, (256,))
    loader = DataLoader(
        TensorDataset(x, y), batch_size=16, shuffle=True, num_workers=2, persistent_workers=True
    )
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 3))
    optimizer = scheduler = None
    if not manual:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=48)
    guard = None
    if use_guard:
        import trainmedic.torch as tm

        guard = tm.guard(model, None if manual else optimizer, every=3)
    order = []
    for _ in range(3):
        model.train()
        for xb, yb in loader:
            order.extend(yb.tolist())
            if manual:
                model.zero_grad()
            else:
                optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xb + 0.01 * torch.randn_like(xb)), yb)
            loss.backward()
            if manual:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                for p in model.parameters():
                    p.data.add_(p.grad, alpha=-0.1)
                continue
            optimizer.step()
            scheduler.step()
    if guard is not None:
        guard.stop()
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.numpy().tobytes())
    with open(out, "w") as f:
        f.write(f"{digest.hexdigest()} {hashlib.sha256(str(order).encode()).hexdigest()}\n")


if __name__ == "__main__":
    main(sys.argv[1], "guard" in sys.argv[2:], "manual" in sys.argv[2:])
