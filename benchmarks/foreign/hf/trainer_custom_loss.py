"""Hugging Face `Trainer` subclass with its own `compute_loss` (class-weighted, label-smoothed
cross-entropy).

A tiny BERT built from a config (no download) classifies token sequences: class 1 draws
80 % of its tokens from the upper half of the vocabulary, class 0 20 %. Healthy as written
(label smoothing 0.1). `--bug smoothing` types the label smoothing as 1.0: every target
becomes the uniform distribution, the model learns to predict it for every input, and the
loss sits at ln 2 = 0.693 (TRN003 not-learning at chance level).
"""

import argparse
import tempfile

from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["smoothing"], default=None)
parser.add_argument("--out", default=None, help="output_dir (default: a fresh temporary folder)")
args = parser.parse_args()

torch.manual_seed(0)
VOCAB, LENGTH = 64, 24
SMOOTHING = 1.0 if args.bug == "smoothing" else 0.1


class TokenDataset(torch.utils.data.Dataset):
    def __init__(self, n):
        self.labels = (torch.rand(n) < 0.5).long()
        low = torch.randint(8, 36, (n, LENGTH))  # class 0 draws most tokens from 8..35
        high = torch.randint(36, VOCAB, (n, LENGTH))  # class 1 from 36..63
        mostly = torch.rand(n, LENGTH) < 0.8
        self.ids = torch.where(mostly == self.labels[:, None].bool(), high, low)
        self.ids[:, 0] = 2  # [CLS]

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        mask = torch.ones(LENGTH, dtype=torch.long)
        return {"input_ids": self.ids[i], "attention_mask": mask, "labels": self.labels[i]}


class WeightedTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        weight = torch.tensor([1.0, 1.2], device=outputs.logits.device)
        loss = nn.functional.cross_entropy(outputs.logits, labels, weight=weight, label_smoothing=SMOOTHING)
        return (loss, outputs) if return_outputs else loss


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
training_args = TrainingArguments(
    output_dir=args.out or tempfile.mkdtemp(prefix="hf-custom-loss-"),
    num_train_epochs=3,
    per_device_train_batch_size=32,
    learning_rate=5e-4,
    warmup_steps=10,
    logging_steps=5,
    save_strategy="no",
    report_to=[],
    use_cpu=True,
    disable_tqdm=True,
)
trainer = WeightedTrainer(model=model, args=training_args, train_dataset=TokenDataset(1024))
result = trainer.train()
print(f"final training loss {result.training_loss:.3f}")
