"""HF Trainer evaluating on its training dataset itself (`eval_dataset=train_dataset`): TRN009.

The eval loss, the best checkpoint and early stopping then measure memorisation. The guard's
callback sees the training and evaluation dataloaders at each evaluation.
"""

from __future__ import annotations

import pytest

import torch
from torch import nn

transformers = pytest.importorskip("transformers")
torch.set_num_threads(1)


class Pairs(torch.utils.data.Dataset):
    def __init__(self, n: int, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 8, generator=generator)
        self.y = (self.x[:, 0] > 0).long()

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[i], "labels": self.y[i]}


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        logits = self.net(x)
        return {"loss": nn.functional.cross_entropy(logits, labels), "logits": logits}


@pytest.mark.parametrize("evaluated_on", ["train", "held-out"])
def test_an_eval_dataset_that_is_the_train_dataset_is_trn009(evaluated_on: str, tmp_path) -> None:
    import trainmedic.hf

    torch.manual_seed(0)
    train = Pairs(128, seed=0)
    held_out = Pairs(64, seed=1)
    guard = trainmedic.hf.Guard()
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        num_train_epochs=2,
        per_device_train_batch_size=16,
        eval_strategy="epoch",
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = transformers.Trainer(
        model=Classifier(),
        args=args,
        train_dataset=train,
        eval_dataset=train if evaluated_on == "train" else held_out,
        callbacks=[guard],
    )
    trainer.train()
    assert guard.guard is not None
    codes = [f.code for f in guard.guard.findings()]
    assert ("TRN009" in codes) == (evaluated_on == "train")
