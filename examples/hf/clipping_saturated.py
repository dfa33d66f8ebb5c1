"""TRN010 with the Hugging Face Trainer: `max_grad_norm` hides a learning rate 10,000x too high.

A tiny GPT-2 built from a config (random weights, no download) learns a
synthetic corpus drawn from a fixed Markov chain, as a causal language model.
The Trainer clips the gradient norm to `max_grad_norm=1.0` (its default)
before every update; with `learning_rate=5` (10,000x 5e-4) the norm before
clipping sits about 100 times above 1.0 at every step, while the norm the
optimizer applies is 1.0. Run bare, or under `trainmedic run -- python
examples/hf/clipping_saturated.py` (the Guard callback is added
automatically). `--fixed` uses `learning_rate=5e-4` with 10 warm-up steps:
the healthy form of this run.
"""

import sys
import tempfile

from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

import torch

VOCAB, CONTEXT = 64, 16


class MarkovText(torch.utils.data.Dataset):
    """CONTEXT-token chunks of text from a random sparse Markov chain over VOCAB words."""

    def __init__(self, chunks, seed):
        g = torch.Generator().manual_seed(seed)
        successors = torch.randint(0, VOCAB, (VOCAB, 3), generator=torch.Generator().manual_seed(0))
        choices = torch.randint(0, 3, (chunks * CONTEXT,), generator=g).tolist()
        words = [int(torch.randint(0, VOCAB, (1,), generator=g))]
        for choice in choices[1:]:
            words.append(int(successors[words[-1], choice]))
        self.ids = torch.tensor(words).view(chunks, CONTEXT)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def main(fixed=False, callbacks=(), epochs=3):
    torch.manual_seed(0)
    config = GPT2Config(
        vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2, n_positions=CONTEXT,
        bos_token_id=0, eos_token_id=0,
    )  # fmt: skip
    model = GPT2LMHeadModel(config)
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            output_dir=out, num_train_epochs=epochs, per_device_train_batch_size=16,
            learning_rate=5e-4 if fixed else 5.0, warmup_steps=10 if fixed else 0,
            max_grad_norm=1.0, eval_strategy="epoch", logging_steps=5, save_strategy="no",
            report_to=[], disable_tqdm=True, use_cpu=True, seed=0,
        )  # fmt: skip
        trainer = Trainer(
            model=model, args=args, train_dataset=MarkovText(512, 0), eval_dataset=MarkovText(64, 1),
            callbacks=list(callbacks),
        )  # fmt: skip
        trainer.train()
    return trainer


if __name__ == "__main__":
    main(fixed="--fixed" in sys.argv)
