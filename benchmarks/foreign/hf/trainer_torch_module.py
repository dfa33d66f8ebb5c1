"""The Hugging Face `Trainer` as written in its docs, on a plain `torch.nn.Module` whose forward
takes the batch's keys and returns `{"loss": ..., "logits": ...}` (no custom `compute_loss`),
with a linear warm-up and decay schedule, evaluation every epoch and `compute_metrics`.

A bag-of-embeddings classifier sorts token sequences: class 1 draws 80 % of its tokens from
the upper half of the vocabulary, class 0 20 %. Healthy as written. `--bug softmax-head` has
the head return probabilities ("so that `logits` are readable") and computes the loss from
them with `F.cross_entropy`, which applies its own log-softmax: probabilities are fed to
cross-entropy (TOR004 softmax-into-crossentropy). `--bug eval-on-train` passes the training
dataset as `eval_dataset` (TRN009 eval-set-is-train).
"""

import argparse
import tempfile

import numpy as np
import torch.nn.functional as F
from transformers import Trainer, TrainingArguments

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["softmax-head", "eval-on-train"], default=None)
parser.add_argument("--out", default=None, help="output_dir (default: a fresh temporary folder)")
args = parser.parse_args()

torch.manual_seed(0)
VOCAB, LENGTH = 64, 24


class TokenDataset(torch.utils.data.Dataset):
    def __init__(self, n):
        self.labels = (torch.rand(n) < 0.5).long()
        low = torch.randint(0, VOCAB // 2, (n, LENGTH))
        high = torch.randint(VOCAB // 2, VOCAB, (n, LENGTH))
        mostly = torch.rand(n, LENGTH) < 0.8
        self.ids = torch.where(mostly == self.labels[:, None].bool(), high, low)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


class BagOfEmbeddings(nn.Module):
    def __init__(self, softmax_head: bool = False):
        super().__init__()
        self.embed = nn.EmbeddingBag(VOCAB, 32, mode="mean")
        self.classifier = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 2))
        self.softmax_head = softmax_head

    def forward(self, input_ids, labels=None):
        logits = self.classifier(self.embed(input_ids))
        if self.softmax_head:
            logits = F.softmax(logits, dim=-1)
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        return {"loss": loss, "logits": logits}


def compute_metrics(eval_pred):
    logits, labels = eval_pred
    return {"accuracy": float((np.argmax(logits, axis=-1) == labels).mean())}


training_args = TrainingArguments(
    output_dir=args.out or tempfile.mkdtemp(prefix="hf-torch-module-"),
    num_train_epochs=3,
    per_device_train_batch_size=32,
    per_device_eval_batch_size=128,
    learning_rate=3e-3,
    lr_scheduler_type="linear",
    warmup_steps=10,
    logging_steps=5,
    eval_strategy="epoch",
    save_strategy="no",
    report_to=[],
    use_cpu=True,
    disable_tqdm=True,
)
train_set = TokenDataset(1024)
trainer = Trainer(
    model=BagOfEmbeddings(softmax_head=args.bug == "softmax-head"),
    args=training_args,
    train_dataset=train_set,
    eval_dataset=train_set if args.bug == "eval-on-train" else TokenDataset(256),
    compute_metrics=compute_metrics,
)
trainer.train()
print(trainer.evaluate())
