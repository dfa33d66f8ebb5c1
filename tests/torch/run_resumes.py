"""Resumes in ONE instrumented interpreter, as under `run` (TOR017).

Before each case it sends a marker event and gives the auto-installed monitor a fresh start
(as `run_loads.py` does), so a test can cut the events file into one record per case.
argv: CASE ... (see CASES). Every case trains for real: the PyTorch recipe's checkpoint
(examples/torch/resume_state_lost.py, and its --mid-epoch form), a Lightning checkpoint, a
Hugging Face Trainer checkpoint folder of the tiny Llama (examples/llm/tinylm.py), Accelerate's
`save_state` folder. Nothing is synthetic but the data.
"""

import contextlib
import io
import runpy
import sys
import tempfile
from pathlib import Path

from case_markers import run_each

import torch
from torch import nn

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "torch"
WORK = Path(tempfile.mkdtemp(prefix="run-resumes-"))


def example(fixed):
    main = runpy.run_path(str(EXAMPLES / "resume_state_lost.py"), run_name="example")["main"]
    with contextlib.redirect_stdout(io.StringIO()):
        main(fixed)


def mid_epoch(fixed):
    """The --mid-epoch checkpoint (step 40 of 16-batch epochs, with the generators' states)."""
    main = runpy.run_path(str(EXAMPLES / "resume_state_lost.py"), run_name="example")["main_mid_epoch"]
    with contextlib.redirect_stdout(io.StringIO()):
        main(fixed)


def scheduler_lost():
    """The recipe's checkpoint with its optimizer's state loaded and its scheduler's not."""
    example_module = runpy.run_path(str(EXAMPLES / "resume_state_lost.py"), run_name="example")
    build = example_module["build"]
    model, optimizer, scheduler = build()
    model(torch.randn(4, 20)).sum().backward()
    optimizer.step()
    for _ in range(20):
        scheduler.step()
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
    }
    torch.save(state, WORK / "sched.pt")
    model, optimizer, scheduler = build()
    checkpoint = torch.load(WORK / "sched.pt")
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    model(torch.randn(4, 20)).sum().backward()
    optimizer.step()


def new_head():
    """A checkpoint with Adam's state whose weights load (strict=False) into a model with a new
    layer on top, under a new optimizer: a fine-tune, not a resume."""
    torch.manual_seed(0)
    old = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 10))
    optimizer = torch.optim.Adam(old.parameters())
    old(torch.randn(4, 8)).sum().backward()
    optimizer.step()
    torch.save({"model": old.state_dict(), "optimizer": optimizer.state_dict()}, WORK / "pre.pt")
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 10), nn.ReLU(), nn.Linear(10, 3))
    model.load_state_dict(torch.load(WORK / "pre.pt")["model"], strict=False)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.randn(4, 8)).sum().backward()
    optimizer.step()


def amp(load_scaler):
    """fp16 autocast on CPU under a GradScaler that grows every 2 steps; the resume loads the
    model and the optimizer, and the scaler's state or not."""
    torch.manual_seed(0)
    x, y = torch.randn(64, 8), torch.randn(64, 1)

    def build():
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
        return model, optimizer, torch.amp.GradScaler("cpu", init_scale=2.0**8, growth_interval=2)

    def steps(model, optimizer, scaler, count):
        for _ in range(count):
            optimizer.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                loss = nn.functional.mse_loss(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()

    model, optimizer, scaler = build()
    steps(model, optimizer, scaler, 6)
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict()}
    torch.save(state, WORK / "amp.pt")
    model, optimizer, scaler = build()
    checkpoint = torch.load(WORK / "amp.pt")
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    if load_scaler:
        scaler.load_state_dict(checkpoint["scaler"])
    steps(model, optimizer, scaler, 2)


# -- Lightning ---------------------------------------------------------------------------------


def _lightning():
    import lightning as L
    from torch.utils.data import DataLoader, TensorDataset

    class Regressor(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))

        def training_step(self, batch, _):
            x, y = batch
            return nn.functional.mse_loss(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-2)

    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 4, generator=g)
    loader = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)

    def trainer(epochs):
        return L.Trainer(
            max_epochs=epochs,
            accelerator="cpu",
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            default_root_dir=WORK,
        )

    path = WORK / "lightning.ckpt"
    if not path.exists():
        first = trainer(2)
        first.fit(Regressor(), loader)
        first.save_checkpoint(path)
    return Regressor, trainer, loader, path


def lightning_weights_only():
    """load_from_checkpoint, then fit without ckpt_path: the weights alone come back."""
    regressor, trainer, loader, path = _lightning()
    with contextlib.redirect_stderr(io.StringIO()):
        trainer(4).fit(regressor.load_from_checkpoint(path), loader)


def lightning_ckpt_path():
    regressor, trainer, loader, path = _lightning()
    with contextlib.redirect_stderr(io.StringIO()):
        trainer(4).fit(regressor(), loader, ckpt_path=path)


# -- Accelerate --------------------------------------------------------------------------------


def accelerate(prepare_scheduler, skip):
    """AdamW under a warm-up schedule, one CPU process; `save_state` after 12 steps (4 batches
    into the second epoch of 8), then a new Accelerator, `load_state`, and 2 steps: the
    scheduler passed to `prepare` or not, the interrupted epoch resumed through
    `skip_first_batches` or from its first batch."""
    from accelerate import Accelerator
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    x = torch.randn(64, 8)
    y = x.sum(1, keepdim=True)

    def build():
        accelerator = Accelerator(cpu=True)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 8))
        loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True)
        if prepare_scheduler:
            model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
        else:
            model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        return accelerator, model, optimizer, scheduler, loader

    def steps(built, loader, count):
        accelerator, model, optimizer, scheduler, _ = built
        while True:
            for xb, yb in loader:
                accelerator.backward(nn.functional.mse_loss(model(xb), yb))
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
                count -= 1
                if count == 0:
                    return

    built = build()
    steps(built, built[-1], 12)
    folder = Path(tempfile.mkdtemp(dir=WORK)) / "state"
    built[0].save_state(folder)
    built = build()
    built[0].load_state(folder)
    loader = built[0].skip_first_batches(built[-1], 12 % 8) if skip else built[-1]
    steps(built, loader, 2)


# -- Hugging Face Trainer ----------------------------------------------------------------------


def _hf():
    sys.path.insert(0, str(REPO / "examples" / "llm"))
    import tinylm
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    folder = tinylm.cached()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 200, (16, 12), generator=g)
    data = [{"input_ids": row, "labels": row} for row in ids]
    out = WORK / "hf"

    def train(model, **kwargs):
        args = TrainingArguments(
            output_dir=str(out),
            max_steps=4,
            save_steps=2,
            per_device_train_batch_size=4,
            learning_rate=1e-3,
            warmup_steps=2,
            logging_steps=1,
            report_to=[],
            use_cpu=True,
            disable_tqdm=True,
        )
        Trainer(model=model, args=args, train_dataset=data).train(**kwargs)

    if not (out / "checkpoint-2").exists():
        train(AutoModelForCausalLM.from_pretrained(folder))
    return AutoModelForCausalLM, train, out / "checkpoint-2"


def hf_resume():
    """Trainer.train(resume_from_checkpoint=path), the model itself loaded from that folder."""
    auto, train, checkpoint = _hf()
    train(auto.from_pretrained(checkpoint), resume_from_checkpoint=str(checkpoint))


def hf_from_pretrained():
    """The checkpoint folder loaded with from_pretrained, then train() from step 0."""
    auto, train, checkpoint = _hf()
    train(auto.from_pretrained(checkpoint))


CASES = {
    "example": lambda: example(False),
    "example:fixed": lambda: example(True),
    "scheduler-lost": scheduler_lost,
    "new-head": new_head,
    "amp:scaler-lost": lambda: amp(False),
    "amp:scaler-loaded": lambda: amp(True),
    "lightning:ckpt_path": lightning_ckpt_path,
    "lightning:weights-only": lightning_weights_only,
    "mid-epoch": lambda: mid_epoch(False),
    "mid-epoch:fixed": lambda: mid_epoch(True),
    "accelerate:full": lambda: accelerate(prepare_scheduler=True, skip=True),
    "accelerate:scheduler-unregistered": lambda: accelerate(prepare_scheduler=False, skip=True),
    "accelerate:no-skip": lambda: accelerate(prepare_scheduler=True, skip=False),
    "hf:resume": hf_resume,
    "hf:from_pretrained": hf_from_pretrained,
}


def main(cases):
    sys.path.insert(0, str(EXAMPLES))
    run_each(CASES, cases, quiet=True)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(sys.argv[1:])
