"""RLOO whose reference is not the policy it starts from, sampled with a constraint: KL < 0 (TRN016).

    python examples/llm/rloo_reference_not_policy.py            # the bug
    python examples/llm/rloo_reference_not_policy.py --fixed    # policy = reference, its own samples

The script changes the model in memory before RL (here: it makes the model end its answers
early, `tinylm.answer_briefly`, standing in for an SFT stage run in the same script) and
passes the object to TRL's `RLOOTrainer`. TRL 1.16 builds the reference by reloading the
model from its `name_or_path` (`create_model_from_path(get_config_model_id(model.config))`),
so the reference is the checkpoint on disk, not the policy. The generation is constrained
(`generation_kwargs={"min_new_tokens": 8}`), so the completions are not samples of the
scored policy: on the forced tokens the policy, which wanted to stop, gives each a lower
log-probability than the reference does. RLOO's k1 estimate (log pi - log pi_ref) is then
negative from the first log: the KL penalty (beta 0.05) pays the policy for moving away.

Either half alone is enough to break the estimate: with the reference equal to the starting
policy but the generation still forced, the KL starts at 0 and falls below 0 as soon as the
policy moves (the forced tokens are still not the policy's samples). `--fixed` saves the
changed model and passes its path (TRL loads the policy and the reference from the same
weights) and samples without the constraint: the KL starts at exactly 0 and stays >= 0 up to
noise.
"""

import argparse
import sys
import tempfile
from pathlib import Path

from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import RLOOConfig, RLOOTrainer

parser = argparse.ArgumentParser()
parser.add_argument("--fixed", action="store_true")
args = parser.parse_args()

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tinylm  # noqa: E402

MODEL = tinylm.cached()
out = Path(tempfile.mkdtemp(prefix="rloo-"))
tokenizer = AutoTokenizer.from_pretrained(MODEL)
tokenizer.pad_token = "<|endoftext|>"
model = tinylm.answer_briefly(AutoModelForCausalLM.from_pretrained(MODEL), tokenizer, first_token_end=0.9)
if args.fixed:
    model.save_pretrained(out / "start")
    tokenizer.save_pretrained(out / "start")
    model = str(out / "start")


def concise_reward(completions, **kwargs):
    """1.0 for a short answer: 1 to 20 characters."""
    return [1.0 if 1 <= len(c[0]["content"].strip()) <= 20 else 0.0 for c in completions]


prompts = [{"prompt": [{"role": "user", "content": r["prompt"]}]} for r in tinylm.instructions(32)]
training_args = RLOOConfig(
    output_dir=str(out / "run"),
    per_device_train_batch_size=8,
    num_generations=4,
    max_completion_length=12,
    generation_kwargs=None if args.fixed else {"min_new_tokens": 8},
    max_steps=6,
    learning_rate=1e-4,
    logging_steps=1,
    save_strategy="no",
    report_to="none",
    use_cpu=True,
    bf16=False,
    disable_tqdm=True,
    seed=0,
)
trainer = RLOOTrainer(
    model=model,
    reward_funcs=concise_reward,
    args=training_args,
    train_dataset=Dataset.from_list(prompts),
    processing_class=tokenizer,
)
trainer.train()
