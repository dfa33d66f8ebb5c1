"""RL fine-tuning with TRL's `GRPOTrainer` as its docs write it: a prompt-only conversational
data set, rule-based reward functions (`def reward(completions, **kwargs) -> list[float]`,
each completion a list of messages), a `GRPOConfig` and the trainer given the model and its
tokenizer.

The "Hub checkpoint" is tinylm (examples/llm/tinylm.py, made offline once under the system
temp folder), made to end its answers early (`tinylm.answer_briefly`: most completions are
empty at the start) as a chat model that has learned to stop does; the prompts are
tinylm's arithmetic and word tasks. Groups of 4 completions of at most 12 tokens, 12 steps.

Healthy as written: the quick start's `reward_len` (answers of about 20 characters,
-abs(20 - len(content))). At the start most groups are all empty answers, all rewarded -20
(uniform groups, frac_reward_zero_std high); the few that differ teach the model to answer,
the share of uniform groups falls and the reward rises toward 0, at lengths well under the
budget. The bugs:
- `format-never-matched`: the reward of TRL's docs' format example, a regex for
  `<think>...</think><answer>...</answer>` that this model never writes: every completion
  gets 0.0, every group is uniform, the loss and the gradient are 0 for the whole run
  (TRN015 reward-zero-variance);
- `length-reward`: a reward that pays for the answer's length (len(content) / 50, "longer
  reasoning is better"): the mean length climbs from under 2 tokens to the 12 of
  max_completion_length and nearly every completion is cut there, while the reward rises
  (TRN017 reward-hacking-length). This run trains at 1e-3: at 1e-4 this random model's
  length barely moves in 10 steps (at 1e-3 its first step removes the EOS prior, which is
  why the healthy run stays at 1e-4).
"""

import argparse
import re
import sys
import tempfile
from pathlib import Path

from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["format-never-matched", "length-reward"], default=None)
parser.add_argument("--out", default=None, help="output_dir (default: a fresh temporary folder)")
parser.add_argument("--steps", type=int, default=10)
args = parser.parse_args()

# -- the stand-in for a Hub checkpoint: tinylm, made once under the temp folder -----------
sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "llm"))
import tinylm  # noqa: E402

MODEL = tinylm.cached()  # made once, shared by parallel runs
# ------------------------------------------------------------------------------------------

tokenizer = AutoTokenizer.from_pretrained(MODEL)
tokenizer.pad_token = "<|endoftext|>"
model = tinylm.answer_briefly(AutoModelForCausalLM.from_pretrained(MODEL), tokenizer, first_token_end=0.93)

train_dataset = Dataset.from_list(
    [{"prompt": [{"role": "user", "content": row["prompt"]}]} for row in tinylm.instructions(64)]
)


def reward_len(completions, **kwargs):
    """The quick start's reward: answers of about 20 characters."""
    contents = [completion[0]["content"] for completion in completions]
    return [-abs(20 - len(content)) for content in contents]


def format_reward(completions, **kwargs):
    """Reward function that checks if the completion has a specific format."""
    pattern = r"^<think>.*?</think>\s*<answer>.*?</answer>$"
    contents = [completion[0]["content"] for completion in completions]
    return [1.0 if re.match(pattern, content, re.DOTALL) else 0.0 for content in contents]


def length_reward(completions, **kwargs):
    """Longer reasoning is better."""
    return [len(completion[0]["content"]) / 50 for completion in completions]


reward_funcs = {None: reward_len, "format-never-matched": format_reward, "length-reward": length_reward}
training_args = GRPOConfig(
    output_dir=args.out or tempfile.mkdtemp(prefix="trl-grpo-"),
    per_device_train_batch_size=8,
    num_generations=4,
    max_completion_length=12,
    max_steps=args.steps,
    learning_rate=1e-3 if args.bug == "length-reward" else 1e-4,
    logging_steps=1,
    save_strategy="no",
    report_to="none",
    use_cpu=True,
    bf16=False,
    disable_tqdm=True,
    seed=0,
)
trainer = GRPOTrainer(
    model=model,
    reward_funcs=reward_funcs[args.bug],
    args=training_args,
    train_dataset=train_dataset,
    processing_class=tokenizer,
)
trainer.train()
