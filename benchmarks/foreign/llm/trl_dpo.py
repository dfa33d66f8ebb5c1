"""Preference optimisation with TRL's `DPOTrainer` as its quickstart writes it: a conversational
preference data set (`prompt`, `chosen`, `rejected` as lists of messages), a `DPOConfig`, the
trainer given the model and its tokenizer (no `ref_model`: TRL loads a frozen copy of the
model as the reference), then a look at the rewards TRL logged.

The "Hub checkpoint" is tinylm (examples/llm/tinylm.py: a 2-layer Llama with a ChatML
tokenizer, made offline once under the system temp folder); the pairs are tinylm's synthetic
tasks, the right answer chosen and a wrong one rejected. Learning rate 5e-4 (a 2-layer random
model takes a larger rate than the 5e-7 of a billion-parameter one), 2 epochs of 160 pairs:
the loss starts at ln 2 = 0.6931 (the policy is its reference) and falls to about 0.3, the
reward margins grow to about 1.5 and the reward accuracy reaches 1.

Healthy as written. The bugs, each of which TRL runs without a word, logging loss 0.6931,
rewards/margins 0.0 and rewards/accuracies 0.0 at every log (a tie is no win):
- `identical-pairs`: the data set is built by a join that writes the chosen answer into
  `rejected` as well (TRN014 preference-at-chance, cause: identical pairs; DAT018
  identical-preference-pairs from the batches TRL built);
- `beta-zero`: `beta=0.0`, read as "no KL penalty": every reward is beta x log-ratio = 0, and
  the loss has no gradient (TRN014, cause: beta 0);
- `shared-reference`: `ref_model=copy.copy(model)`, meant as "a copy of the starting model":
  a shallow copy holds the policy's own tensors, so the reference moves with the policy
  (TRL refuses `ref_model=model` itself: "`model` and `ref_model` cannot be the same object")
  (TRN014, cause: the reference is the policy).
"""

import argparse
import copy
import sys
import tempfile
from pathlib import Path

from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import DPOConfig, DPOTrainer

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["identical-pairs", "beta-zero", "shared-reference"], default=None)
parser.add_argument("--out", default=None, help="output_dir (default: a fresh temporary folder)")
args = parser.parse_args()

# -- the stand-in for a Hub checkpoint: tinylm, made once under the temp folder -----------
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "llm"))
import tinylm  # noqa: E402

MODEL = tinylm.cached()  # made once, shared by parallel runs
# ------------------------------------------------------------------------------------------

model = AutoModelForCausalLM.from_pretrained(MODEL)
tokenizer = AutoTokenizer.from_pretrained(MODEL)
tokenizer.pad_token = "<|endoftext|>"  # like Qwen's and Llama's, tinylm's tokenizer has none

pairs = [tinylm.conversational(pair) for pair in tinylm.preferences(160)]
if args.bug == "identical-pairs":
    # the rejected column written from the wrong side of a join
    pairs = [{**pair, "rejected": pair["chosen"]} for pair in pairs]
train_dataset = Dataset.from_list(pairs)

training_args = DPOConfig(
    output_dir=args.out or tempfile.mkdtemp(prefix="trl-dpo-"),
    beta=0.0 if args.bug == "beta-zero" else 0.1,
    num_train_epochs=2,
    per_device_train_batch_size=8,
    learning_rate=5e-4,
    logging_steps=5,
    save_strategy="no",
    report_to="none",
    use_cpu=True,
    bf16=False,
    disable_tqdm=True,
    seed=0,
)
trainer = DPOTrainer(
    model=model,
    ref_model=copy.copy(model) if args.bug == "shared-reference" else None,
    args=training_args,
    train_dataset=train_dataset,
    processing_class=tokenizer,
)
trainer.train()

# what the quickstart looks at: the rewards TRL logged
for log in trainer.state.log_history:
    if "rewards/margins" in log:
        print(
            f"step {log['step']}: loss {log['loss']:.4f}, margins {log['rewards/margins']:.4f}, "
            f"accuracies {log['rewards/accuracies']:.2f}"
        )
