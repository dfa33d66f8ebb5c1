"""Lightning's Transformer language-model example: `L.Trainer(gradient_clip_val=0.25)`.

The model is Lightning's own demo (`lightning.pytorch.demos.Transformer`, an
`nn.Transformer` with a log-softmax decoder), trained with SGD at lr 0.1 on 35-token blocks,
as the example does on WikiText-2. No download: the text is drawn from a fixed sparse
Markov chain over 64 words. The gradient norm before clipping is ten or more times the
threshold at nearly every step and the loss falls steadily: clipping by design, the
threshold bounds every step while the model learns.

Healthy as written (pre-clip norm ~5.5, ~20x the threshold on every step; loss 4.36 ->
2.75 over 300 steps). `--bug lr-too-high` trains at lr 1000 (10,000x): clipping still bounds
each update, to lr x 0.25, so the weights are thrown about and the loss ends far above its
start while the applied norm stays at the threshold: clipping hides the blow-up (TRN010).
"""

import argparse

import lightning as L
from lightning.pytorch.demos import Transformer
from torch.utils.data import DataLoader, Dataset

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["lr-too-high"], default=None)
parser.add_argument("--steps", type=int, default=300)
args = parser.parse_args()
VOCAB, BLOCK = 64, 35


class MarkovText(Dataset):
    """Blocks of `BLOCK` tokens and the same shifted by one, as WikiText2 of the demos gives."""

    def __init__(self, tokens: int = 60_000, seed: int = 0) -> None:
        g = torch.Generator().manual_seed(seed)
        successors = torch.randint(0, VOCAB, (VOCAB, 4), generator=g)
        choices = torch.randint(0, 4, (tokens,), generator=g).tolist()
        words = [0]
        for choice in choices[1:]:
            words.append(int(successors[words[-1], choice]))
        self.data = torch.tensor(words)

    def __len__(self) -> int:
        return len(self.data) // BLOCK - 1

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = index * BLOCK
        return self.data[start : start + BLOCK], self.data[start + 1 : start + BLOCK + 1]


class LightningTransformer(L.LightningModule):
    def __init__(self, vocab_size: int, lr: float) -> None:
        super().__init__()
        self.model = Transformer(vocab_size=vocab_size)
        self.lr = lr

    def forward(self, inputs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return self.model(inputs, target)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        inputs, target = batch
        output = self(inputs, target)
        loss = torch.nn.functional.nll_loss(output, target.view(-1))
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.model.parameters(), lr=self.lr)


L.seed_everything(42, verbose=False)
dataset = MarkovText()
model = LightningTransformer(VOCAB, lr=1000.0 if args.bug == "lr-too-high" else 0.1)
trainer = L.Trainer(
    gradient_clip_val=0.25,
    max_steps=args.steps,
    accelerator="cpu",
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
)
trainer.fit(model, DataLoader(dataset, batch_size=8, shuffle=True))
print(f"final train loss {float(trainer.callback_metrics['train_loss']):.3f}")
