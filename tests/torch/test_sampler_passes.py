"""TOR005 judges only the DistributedSampler passes whose batches were trained on (issue #41).

A trainer in the minGPT style runs one `_run_epoch` for training and for evaluation; it sets
the epoch of the training loader's sampler and not the evaluation loader's, whose order does
not matter. Only the training sampler's passes count; its missing `set_epoch` is still found.
"""

from __future__ import annotations

from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import torch
import trainmedic.torch as tm

torch.set_num_threads(1)


def train_and_evaluate(set_train_epoch: bool, eval_batches: int | None = None) -> set[str]:
    """Two epochs of training, each followed by an evaluation pass over a sampler never set.

    `eval_batches`: the evaluation pass stops after that many batches (a `break`), else runs out.
    """
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(256, 8), torch.randint(0, 3, (256,))
    train = DataLoader(TensorDataset(x, y), batch_size=32, sampler=DistributedSampler(x, 1, 0))
    test = DataLoader(TensorDataset(x, y), batch_size=32, sampler=DistributedSampler(x, 1, 0))

    def run_epoch(epoch: int, loader: DataLoader, training: bool) -> None:
        if training and set_train_epoch:
            loader.sampler.set_epoch(epoch)
        for i, (inputs, targets) in enumerate(loader):
            if not training and eval_batches is not None and i == eval_batches:
                break
            with torch.set_grad_enabled(training):
                loss = torch.nn.functional.cross_entropy(model(inputs), targets)
            if training:
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

    with tm.guard(model, optimizer) as guard:
        for epoch in range(3):
            run_epoch(epoch, train, training=True)
            run_epoch(epoch, test, training=False)
    return {f.code for f in guard.findings()}


def test_an_evaluation_sampler_without_set_epoch_is_not_reported() -> None:
    assert "TOR005" not in train_and_evaluate(set_train_epoch=True)


def test_an_evaluation_pass_cut_short_is_not_a_training_pass() -> None:
    assert "TOR005" not in train_and_evaluate(set_train_epoch=True, eval_batches=2)


def test_a_training_sampler_without_set_epoch_is_still_reported() -> None:
    assert "TOR005" in train_and_evaluate(set_train_epoch=False)
    assert "TOR005" in train_and_evaluate(set_train_epoch=False, eval_batches=2)
