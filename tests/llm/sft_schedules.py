"""An SFTTrainer full fine-tune of the tiny offline model (examples/llm/tinylm.py), 80 steps
logging every 2: `healthy` at a constant learning rate of 3e-3; `spike` with the learning rate
100x higher for steps 16 to 18 (a schedule that spikes), whose loss blows up from 3.4 to 23.6
at step 22, stays above 10 until step 38 and comes back down to 1.5-1.7 by the end.

Run as a script in the run's folder: `python sft_schedules.py healthy|spike`."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

TINYLM = Path(__file__).resolve().parents[2] / "examples" / "llm" / "tinylm.py"
#: Steps of the run and the Trainer's logging interval.
STEPS, LOGGING_STEPS = 80, 2
#: The learning rate, and the stretch of steps the spike multiplies it by SPIKE_FACTOR.
LEARNING_RATE = 3e-3
SPIKE_FROM, SPIKE_TO, SPIKE_FACTOR = 16, 19, 100.0


def main(case: str) -> None:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    import torch

    spec = importlib.util.spec_from_file_location("tinylm", TINYLM)
    assert spec is not None
    assert spec.loader is not None
    tinylm = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tinylm)
    folder = tinylm.cached()
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    tokenizer.pad_token = "<|endoftext|>"
    model = AutoModelForCausalLM.from_pretrained(folder)
    config = SFTConfig(
        output_dir=str(Path.cwd() / "out"), max_steps=STEPS, per_device_train_batch_size=8,
        learning_rate=LEARNING_RATE, logging_steps=LOGGING_STEPS, max_length=64, report_to=[],
        save_strategy="no", use_cpu=True, bf16=False, disable_tqdm=True, seed=0,
        activation_checkpointing=False,
    )  # fmt: skip
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    spiking = case == "spike"

    def factor(step: int) -> float:
        return SPIKE_FACTOR if spiking and SPIKE_FROM <= step < SPIKE_TO else 1.0

    trainer = SFTTrainer(
        model=model, args=config, train_dataset=Dataset.from_list(tinylm.instructions(STEPS * 8)),
        processing_class=tokenizer,
        optimizers=(optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)),
    )  # fmt: skip
    trainer.train()


if __name__ == "__main__":
    main(sys.argv[1])
