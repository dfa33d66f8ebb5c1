"""A plain PyTorch loop made device-agnostic with Hugging Face Accelerate, in the style of its
`nlp_example.py` and gradient-accumulation examples.

`Accelerator(gradient_accumulation_steps=2)` prepares a tiny BERT built from a config (no
download), AdamW, the data loaders and a linear warm-up schedule; each batch runs inside
`accelerator.accumulate(model)` with `accelerator.backward(loss)` (the prepared optimizer
and scheduler step on every second batch), and every epoch ends with an evaluation through
`accelerator.gather_for_metrics`.

Healthy as written (`model.train()` at the top of each epoch). `--bug no-train-mode` calls
`model.train()` once, before the epoch loop: after the first evaluation's `model.eval()`,
epochs 2 and 3 train with dropout off (TOR002 eval-mode-training).

Synthetic data: class 1 draws 80 % of its tokens from the upper half of the vocabulary,
class 0 20 %.
"""

import argparse

from accelerate import Accelerator
from torch.utils.data import DataLoader, Dataset
from transformers import BertConfig, BertForSequenceClassification, get_linear_schedule_with_warmup

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["no-train-mode"], default=None)
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()

VOCAB, LENGTH = 64, 24


class TokenDataset(Dataset):
    def __init__(self, n, generator):
        self.labels = (torch.rand(n, generator=generator) < 0.5).long()
        low = torch.randint(8, 36, (n, LENGTH), generator=generator)
        high = torch.randint(36, VOCAB, (n, LENGTH), generator=generator)
        mostly = torch.rand(n, LENGTH, generator=generator) < 0.8
        self.ids = torch.where(mostly == self.labels[:, None].bool(), high, low)
        self.ids[:, 0] = 2  # [CLS]

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {
            "input_ids": self.ids[i],
            "attention_mask": torch.ones(LENGTH, dtype=torch.long),
            "labels": self.labels[i],
        }


def training_function():
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=2)
    torch.manual_seed(42)
    generator = torch.Generator().manual_seed(0)
    train_dataloader = DataLoader(TokenDataset(768, generator), batch_size=16, shuffle=True)
    eval_dataloader = DataLoader(TokenDataset(256, generator), batch_size=64)

    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=LENGTH,
        num_labels=2,
    )
    model = BertForSequenceClassification(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4)
    lr_scheduler = get_linear_schedule_with_warmup(
        optimizer, num_warmup_steps=5, num_training_steps=len(train_dataloader) * args.epochs // 2
    )
    model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader, lr_scheduler
    )

    if args.bug == "no-train-mode":
        model.train()
    for epoch in range(args.epochs):
        if args.bug != "no-train-mode":
            model.train()
        for batch in train_dataloader:
            with accelerator.accumulate(model):
                outputs = model(**batch)
                accelerator.backward(outputs.loss)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()

        model.eval()
        correct = total = 0
        for batch in eval_dataloader:
            with torch.no_grad():
                logits = model(**batch).logits
            predictions, references = accelerator.gather_for_metrics((logits.argmax(dim=-1), batch["labels"]))
            correct += int((predictions == references).sum())
            total += len(references)
        accelerator.print(f"epoch {epoch}: accuracy {correct / total:.3f}")


if __name__ == "__main__":
    training_function()
