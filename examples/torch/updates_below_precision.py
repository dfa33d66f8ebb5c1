"""TRN013: a model cast to bf16 before Adam: most updates round away.

`model.to(torch.bfloat16)` puts the weights themselves in bf16 (8 significant bits);
Adam at lr 2e-4 makes updates of about 2e-4 per element, under half a unit in the last
place of any weight above ~0.1, so those weights never change although their gradients
are non-zero. The loss creeps down through the few elements that do move. `--fixed`
keeps fp32 weights and runs the forward pass under bf16 autocast (mixed precision).
"""

from common import FIXED, MLP, make_data, make_loader

import torch
from torch import nn


def main(fixed=FIXED, epochs=6):
    torch.manual_seed(0)
    x, y = make_data(n=1024)
    loader = make_loader(x, y, batch_size=32)
    model = MLP(hidden=128)
    if not fixed:
        model = model.to(torch.bfloat16)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-4)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        model.train()
        for xb, yb in loader:
            optimizer.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=fixed):
                logits = model(xb if fixed else xb.to(torch.bfloat16))
            loss = loss_fn(logits.float(), yb)
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
