"""Write the preference-data cases: `python -m benchmarks.failures.make_preference OUT`.

TRL's preference format (`prompt`, `chosen`, `rejected`) on tinylm's synthetic tasks
(examples/llm/tinylm.py): the right answer chosen, a wrong one rejected, one pair a prompt.
Each failure is planted the way it happens in preparation scripts: a join that writes the
chosen answer into `rejected` (238 of 728 pairs), rejected answers cut short in nearly every
pair, prompts rendered to text with a chat template that writes BOS (tinylm's tokenizer with a
BOS, `tinylm.make_bos_tokenizer`). The control is the healthy set, the chosen longer in about
60 % of the pairs. tests/data/test_preference.py writes the same rows. Deterministic, a few
seconds (the tokenizer is trained here, nothing is downloaded).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "llm"))
import tinylm

Rows = list[dict[str, Any]]


def healthy() -> tuple[Rows, Rows]:
    """300 training and 60 evaluation pairs, distinct prompts, the chosen longer in ~60 %."""
    pairs = tinylm.preferences(360, chosen_longer=0.6)
    return pairs[:300], pairs[300:]


def identical() -> Rows:
    """728 pairs, every third of the first 714 with its chosen answer copied into `rejected`."""
    pairs = tinylm.preferences(728, seed=1)
    slipped = set(range(0, 728, 3)[:238])
    return [{**p, "rejected": p["chosen"]} if i in slipped else p for i, p in enumerate(pairs)]


def length_biased() -> Rows:
    """300 pairs whose rejected answer was cut short in ~95 % of them."""
    return tinylm.preferences(300, seed=2, chosen_longer=0.95)


def rendered_prompts(tokenizer_dir: Path, pairs: Rows) -> Rows:
    """The common recipe: each prompt rendered to text with the chat template before DPOTrainer."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)

    def render(prompt: str) -> str:
        messages = [{"role": "user", "content": prompt}]
        return str(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))

    return [{**p, "prompt": render(p["prompt"])} for p in pairs]


def write_jsonl(path: Path, rows: Rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    train, val = healthy()
    write_jsonl(out / "healthy_train.jsonl", train)
    write_jsonl(out / "healthy_eval.jsonl", val)
    write_jsonl(out / "identical.jsonl", identical())
    write_jsonl(out / "length_bias.jsonl", length_biased())
    tinylm.make_bos_tokenizer(out / "tokenizer_bos")
    write_jsonl(out / "double_bos.jsonl", rendered_prompts(out / "tokenizer_bos", train[:80]))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
