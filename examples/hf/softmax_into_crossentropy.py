"""TOR004 with the Hugging Face Trainer: a custom compute_loss feeds softmax outputs to CrossEntropyLoss.

A tiny BERT built from a config (random weights, no download) classifies
synthetic token sequences. Run bare, or under `trainmedic run -- python
examples/hf/softmax_into_crossentropy.py` (the Guard callback is added
automatically). `--fixed` passes the logits: the healthy form of this run.
"""

import sys
import tempfile

from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

import torch
from torch import nn


class TokenData(torch.utils.data.Dataset):
    """Sequences whose label is whether token 7 occurs in them."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(8, 64, (n, 16), generator=g)
        self.labels = (torch.rand(n, generator=g) < 0.5).long()
        self.ids[self.labels == 1, :4] = 7

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


class SoftmaxLossTrainer(Trainer):
    def __init__(self, *args, fixed, **kwargs):
        super().__init__(*args, **kwargs)
        self.fixed = fixed

    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        scores = outputs.logits if self.fixed else outputs.logits.softmax(dim=-1)
        loss = nn.CrossEntropyLoss()(scores, labels)
        return (loss, outputs) if return_outputs else loss


def main(fixed=False, callbacks=(), epochs=3):
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=32, num_labels=2,
    )  # fmt: skip
    model = BertForSequenceClassification(config)
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            output_dir=out, num_train_epochs=epochs, per_device_train_batch_size=16,
            learning_rate=3e-3, eval_strategy="epoch", logging_steps=5, save_strategy="no",
            report_to=[], disable_tqdm=True, use_cpu=True, seed=0,
        )  # fmt: skip
        trainer = SoftmaxLossTrainer(
            model=model, args=args, train_dataset=TokenData(256, 0), eval_dataset=TokenData(64, 1),
            callbacks=list(callbacks), fixed=fixed,
        )  # fmt: skip
        trainer.train()
    return trainer


if __name__ == "__main__":
    main(fixed="--fixed" in sys.argv)
