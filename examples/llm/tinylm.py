"""A tiny chat model and its tokenizer, made offline: the stand-in for a Hub checkpoint.

    python examples/llm/tinylm.py OUT_DIR        # writes OUT_DIR/{tokenizer,model files}
    python examples/llm/tinylm.py --bos OUT_DIR  # the tokenizer alone, with a BOS its template writes

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
BOS = "<|begin_of_text|>"  # only in the tokenizer of make_bos_tokenizer
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
    return [{"prompt": prompt, "completion": completion} for prompt, completion, _ in _tasks(n, rng)]


def _tasks(n: int, rng: random.Random) -> list[tuple[str, str, str]]:
    """`n` tasks as (prompt, right answer, a wrong answer of the same form)."""
    tasks = []
    for _ in range(n):
        kind = rng.randrange(3)
        if kind == 0:
            a, b = rng.randrange(7), rng.randrange(6)
            prompt = f"What is {_NUMBERS[a]} plus {_NUMBERS[b]}?"
            completion = f"{_NUMBERS[a]} plus {_NUMBERS[b]} is {_NUMBERS[a + b]}."
            wrong = f"{_NUMBERS[a]} plus {_NUMBERS[b]} is {_NUMBERS[(a + b + 2) % len(_NUMBERS)]}."
        elif kind == 1:
            words = rng.sample(_WORDS, 3)
            prompt = "Reverse the words: " + " ".join(words)
            completion = " ".join(reversed(words))
            wrong = " ".join(words[1:] + words[:1])
        else:
            word = rng.choice(_WORDS)
            prompt = f"How many letters are in the word {word}?"
            completion = f"The word {word} has {_NUMBERS[len(word)]} letters."
            wrong = f"The word {word} has {_NUMBERS[len(word) + 1]} letters."
        tasks.append((prompt, completion, wrong))
    return tasks


def preferences(n: int, *, seed: int = 0, chosen_longer: float = 0.5) -> list[dict[str, str]]:
    """`n` preference pairs of the same tasks in TRL's plain format (`prompt`, `chosen`,
    `rejected`), one pair a prompt: the right answer is chosen, a wrong one rejected. The wrong
    answer is cut short (a generation stopped early) in a share `chosen_longer` of the pairs
    and drawn out (a hedge appended) in the others, so the chosen is the longer response in
    that share of the pairs."""
    rng = random.Random(seed)
    pairs, seen = [], set()
    for prompt, completion, wrong in _tasks(40 * n, rng):
        if prompt in seen:
            continue
        seen.add(prompt)
        if rng.random() < chosen_longer:
            rejected = _shorter(wrong, len(completion))
        else:
            rejected = f"{wrong} I think, but I am not sure."
        pairs.append({"prompt": prompt, "chosen": completion, "rejected": rejected})
        if len(pairs) == n:
            return pairs
    raise ValueError(f"only {len(pairs)} distinct prompts: ask for fewer pairs")


def _shorter(text: str, than: int) -> str:
    """`text` without its last words until it is shorter than `than` characters (one word kept)."""
    words = text.split()
    while len(words) > 1 and len(" ".join(words)) >= than:
        words.pop()
    return " ".join(words)


def conversational(pair: dict[str, str]) -> dict[str, list[dict[str, str]]]:
    """A plain preference pair in TRL's conversational format (lists of messages)."""
    return {
        "prompt": [{"role": "user", "content": pair["prompt"]}],
        "chosen": [{"role": "assistant", "content": pair["chosen"]}],
        "rejected": [{"role": "assistant", "content": pair["rejected"]}],
    }


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


def make_bos_tokenizer(out_dir: Path) -> Any:
    """The tokenizer of `make_tokenizer` with a BOS token, as Llama 3's: its call adds BOS to
    every text (`add_bos_token=True`) and its chat template writes BOS first. A text rendered
    with the template and tokenized with the tokenizer's call starts with two (double BOS);
    `apply_chat_template(..., tokenize=True)` starts with one. Saved to `out_dir`."""
    from transformers import AutoTokenizer

    make_tokenizer(out_dir)
    tokenizer = AutoTokenizer.from_pretrained(out_dir, bos_token=BOS, add_bos_token=True)
    tokenizer.chat_template = "{{ bos_token }}" + CHAT_TEMPLATE
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


def answer_briefly(model: Any, tokenizer: Any, *, first_token_end: float) -> Any:
    """Make `model` end its answers early, as a chat model that has learned to stop does.

    tinylm's random weights almost never sample `<|im_end|>` (1 token in ~400), so every RL
    completion would run to `max_completion_length` from the first step. This points the
    head's EOS row along the mean final hidden state of the chat prompts, so that EOS has
    about probability `first_token_end` at each position (GRPO and RLOO then see short
    completions that end, and what they learn moves the length). Returns `model`."""
    import math

    import torch

    prompts = [[{"role": "user", "content": r["prompt"]}] for r in instructions(16, seed=3)]
    with torch.no_grad():
        states = []
        for messages in prompts:
            ids = tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
            )["input_ids"]
            states.append(model(ids, output_hidden_states=True).hidden_states[-1][0])
        hidden = torch.cat(states)
        direction = hidden.mean(0) / hidden.mean(0).norm()
        along = (hidden @ direction).mean()
        others = len(tokenizer) - 1  # the other tokens' logits are near 0: each weighs ~e^0
        logit = math.log(first_token_end / (1 - first_token_end) * others)
        model.lm_head.weight[tokenizer.eos_token_id] = direction * (logit / along)
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
    if len(sys.argv) == 3 and sys.argv[1] == "--bos":
        make_bos_tokenizer(Path(sys.argv[2]))
        print(sys.argv[2])
    elif len(sys.argv) == 2:
        print(ensure(sys.argv[1]))
    else:
        sys.exit("usage: python examples/llm/tinylm.py [--bos] OUT_DIR")
