"""What TOR017's resume check adds to a `torch.load`: one read of the loaded checkpoint's entries.

Under the guard, every `torch.load` whose result is a mapping is read once for an optimizer's
state, a scheduler's and a scaler's (`trainmedic.torch._resumes.read_checkpoint`). This times
that read alone (many repetitions: it is far below the noise of a load), and the load it
follows, for a checkpoint of an 8-layer MLP (2.1 M parameters, 16 tensors) with Adam's state.
Nothing is added to a training step: the step hook exists only between a resume and the next
optimizer step.

    python benchmarks/resume_check_cost.py
"""

from __future__ import annotations

import io
import statistics
import time
import timeit

import torch
from torch import nn
from trainmedic.torch import _resumes


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(512, 512) for _ in range(8)])
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.randn(2, 512)).sum().backward()
    optimizer.step()
    checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 1}
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    data = buffer.getvalue()
    loads = []
    for _ in range(20):
        start = time.perf_counter()
        torch.load(io.BytesIO(data))
        loads.append(time.perf_counter() - start)
    n = 2000
    read = timeit.timeit(lambda: _resumes.read_checkpoint(checkpoint, "ck.pt"), number=n) / n
    print(
        f"checkpoint {len(data) / 2**20:.1f} MiB: torch.load {statistics.median(loads) * 1e3:.1f} ms "
        f"(median of 20), the resume check's read {read * 1e6:.0f} us"
    )


if __name__ == "__main__":
    main()
