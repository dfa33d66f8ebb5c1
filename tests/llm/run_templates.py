"""SFT on tinylm, then a generation prompt rendered with the tokenizer's chat template: the
tests/llm/test_templates.py scenarios.

    python run_templates.py TINYLM_DIR OUT_DIR FORMAT:MAX_LENGTH [FORMAT:MAX_LENGTH ...]

FORMAT is `alpaca` (prompt/completion in the Alpaca format: TRL trains on it as plain text) or
`chat` (conversational: TRL renders it with the chat template). One scenario runs as a user's
script does, nothing added. Several run in ONE interpreter under the boot module (TRL and
transformers imported once): before each, the previous scenario's model, tokenizer and trainer
are freed and its monitor closed (as at the end of its process), the template check's record of
watches and served renders emptied, a fresh monitor installed, and an `example_start` marker
event sent, so a test can cut the events file. The last scenario's monitor closes at the end of
the process, as a plain script's does.
"""

import atexit
import gc
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "llm"))
import tinylm
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer


def sft_then_serve(path, fmt, max_length, out):
    """The SFT run and the served prompt; the model and tokenizer (a script's globals)."""
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    if fmt == "alpaca":
        head = "### Instruction:\n{}\n\n### Response:\n"
        pairs = tinylm.instructions(64)
        rows = [{"prompt": head.format(r["prompt"]), "completion": r["completion"]} for r in pairs]
    else:
        rows = tinylm.conversations(64)
    args = SFTConfig(
        output_dir=out, max_steps=8, per_device_train_batch_size=4, max_length=max_length,
        report_to=[], save_strategy="no", use_cpu=True, disable_tqdm=True,
    )  # fmt: skip
    data = Dataset.from_list(rows)
    SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer).train()
    messages = [{"role": "user", "content": "What is two plus three?"}]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
    print(tokenizer.decode(model.generate(**prompt, max_new_tokens=4, do_sample=False)[0]), flush=True)
    return model, tokenizer


def mark(case, fresh):
    """`fresh`: the previous scenario ends as its process would (its objects freed, then its
    monitor closed), and the next starts as in a new process: the template check's record of
    watches and served renders empty, a fresh monitor, closed at exit as the boot module's is."""
    from trainmedic.events import GuardObservation
    from trainmedic.instrument import channel
    from trainmedic.llm import templates
    from trainmedic.torch import _patches
    from trainmedic.torch._monitor import Monitor

    assert _patches.active() is not None, "the boot module did not instrument torch"
    if fresh:
        gc.collect()
        _patches.active().close()
        templates._watches.clear()  # the closed monitor's watch would say training is on
        templates._renders.clear()
        monitor = Monitor(channel.emit, mode="auto")
        _patches.install(monitor)
        atexit.register(monitor.close)
    channel.emit(GuardObservation(check="example_start", data={"case": case}))


path, out, scenarios = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
held = None
for i, scenario in enumerate(scenarios):
    fmt, max_length = scenario.split(":")
    if len(scenarios) > 1:
        held = None  # the previous scenario's model and tokenizer
        mark(scenario, fresh=i > 0)  # the first keeps the boot module's own monitor
    held = sft_then_serve(path, fmt, int(max_length), str(out / scenario.replace(":", "-")))
