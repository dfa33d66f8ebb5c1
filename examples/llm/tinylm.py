"""A tiny chat model and its tokenizer, made offline: the stand-in for a Hub checkpoint.

    python examples/llm/tinylm.py OUT_DIR        # writes OUT_DIR/{tokenizer,model files}

The fine-tuning examples, tests and benchmarks load OUT_DIR exactly as a user loads
`Qwen/Qwen2.5-0.5B-Instruct`: `AutoTokenizer.from_pretrained(OUT_DIR)`,
`AutoModelForCausalLM.from_pretrained(OUT_DIR)`. Nothing is downloaded.

What it is, and what is synthetic about it:
- the tokenizer is a byte-level BPE trained here with `tokenizers` on the synthetic
  instruction data of `instructions()`, with Qwen's special tokens (`<|im_start|>`,
  `<|im_end|>` as EOS, `<|endoftext|>`) and a ChatML chat template; like Qwen's base and
  Llama's tokenizers it has no pad token, so scripts choose one;
- the model is a 2-layer Llama (hidden size 64) with random weights;
- the data is arithmetic and word tasks written as chat turns ("What is 3 plus 4?" ->
  "3 plus 4 is 7."): a task a tiny model learns in a few hundred steps, not a corpus.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

EOS = "<|im_end|>"
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", EOS]
# ChatML, as Qwen2.5's tokenizer_config.json has it (without the tool-calling branches).
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
_NUMBERS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
]
_WORDS = [
    "apple",
    "river",
    "stone",
    "cloud",
    "garden",
    "silver",
    "window",
    "paper",
    "candle",
    "forest",
    "harbor",
    "meadow",
]


def instructions(n: int, *, seed: int = 0) -> list[dict[str, str]]:
    """`n` prompt/completion pairs of three small tasks (sums, reversal, counting letters)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        kind = rng.randrange(3)
        if kind == 0:
            a, b = rng.randrange(7), rng.randrange(6)
            prompt = f"What is {_NUMBERS[a]} plus {_NUMBERS[b]}?"
            completion = f"{_NUMBERS[a]} plus {_NUMBERS[b]} is {_NUMBERS[a + b]}."
        elif kind == 1:
            words = rng.sample(_WORDS, 3)
            prompt = "Reverse the words: " + " ".join(words)
            completion = " ".join(reversed(words))
        else:
            word = rng.choice(_WORDS)
            prompt = f"How many letters are in the word {word}?"
            completion = f"The word {word} has {_NUMBERS[len(word)]} letters."
        rows.append({"prompt": prompt, "completion": completion})
    return rows


def conversations(n: int, *, seed: int = 0) -> list[dict[str, Any]]:
    """The same tasks in TRL's conversational format (`messages`)."""
    return [
        {
            "messages": [
                {"role": "user", "content": r["prompt"]},
                {"role": "assistant", "content": r["completion"]},
            ]
        }
        for r in instructions(n, seed=seed)
    ]


def make_tokenizer(out_dir: Path) -> Any:
    """Train the BPE on the instruction data and save a `PreTrainedTokenizerFast` to `out_dir`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    texts = [f"{r['prompt']}\n{r['completion']}" for r in instructions(2000, seed=1)]
    texts += ["system user assistant You are a helpful assistant."]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=SPECIAL_TOKENS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    bpe.train_from_iterator(texts, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token=EOS, additional_special_tokens=SPECIAL_TOKENS
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out_dir)
    return tokenizer


def make_model(out_dir: Path, tokenizer: Any, *, seed: int = 0) -> Any:
    """A 2-layer Llama with random weights, sized for `tokenizer`, saved to `out_dir`."""
    from transformers import LlamaConfig, LlamaForCausalLM

    import torch

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        pad_token_id=None,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(out_dir)
    return model


def ensure(out_dir: str | Path) -> Path:
    """`out_dir` holding the tokenizer and the model (made once, then reused)."""
    out = Path(out_dir)
    if not (out / "config.json").exists():
        out.mkdir(parents=True, exist_ok=True)
        make_model(out, make_tokenizer(out))
    return out


def cached() -> Path:
    """The tinylm folder under the system temp folder, made on first use, shared by every run.

    Made in a private folder and then renamed into place, so that runs started together (the
    corpus runs two at a time) never load a half-written model."""
    out = Path(tempfile.gettempdir()) / "trainmedic-tinylm"
    if not (out / "config.json").exists():
        private = ensure(tempfile.mkdtemp(prefix="tinylm-", dir=out.parent))
        with contextlib.suppress(OSError):  # another run got there first
            os.replace(private, out)
        shutil.rmtree(private, ignore_errors=True)
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python examples/llm/tinylm.py OUT_DIR")
    print(ensure(sys.argv[1]))
