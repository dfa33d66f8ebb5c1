"""`trainmedic check data` on fine-tuning data sets (JSONL/Parquet in TRL's formats), through
the real CLI, with the tiny chat model's tokenizer (ChatML) and its synthetic tasks; and the
guard-side DAT016/DAT017 rules' thresholds.

The data sets are written first, then ONE child interpreter (`run_checks.py`) runs every
`trainmedic check data` command of this module through the CLI's own entry, transformers and
the tokenizers loaded once; the tests read its exit status, stdout and stderr per command. The
bad inputs run as commands of their own: they are about the process (exit status 2, one line on
stderr, no traceback). TRL prepares one data set in the test's own process to count its drops.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from trainmedic.record import RunRecord
from trainmedic.registry import run_rules
from trainmedic.rules._helpers.guard import observed
from trainmedic.rules.dat import dat016_chat_template_mismatch as dat016
from trainmedic.rules.dat import dat017_completion_truncated as dat017

from ..conftest import load_tinylm, run_cli, trl_dropped

tinylm = load_tinylm()
HERE = Path(__file__).resolve().parent


def distinct(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows without repeats (the synthetic tasks repeat): a healthy data set."""
    seen, out = set(), []
    for row in rows:
        key = json.dumps(row, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(row)
    return out


CONVERSATIONS = distinct(tinylm.conversations(600))
TRAIN, EVAL = CONVERSATIONS[:150], CONVERSATIONS[150:200]
DROPPED_ROWS = [{"prompt": r["messages"][:1], "completion": r["messages"][1:]} for r in TRAIN]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def alpaca(row: dict[str, str], *, answer: bool = True) -> str:
    return f"### Instruction:\n{row['prompt']}\n\n### Response:\n" + (row["completion"] if answer else "")


# --- the commands: each writes its data in its own folder and gives its arguments --------------

Command = Callable[[Path, Path], list[Any] | None]
COMMANDS: dict[str, Command] = {}


def command(name: str) -> Callable[[Command], Command]:
    def register(build: Command) -> Command:
        COMMANDS[name] = build
        return build

    return register


def json_check(*args: Any) -> list[Any]:
    """`trainmedic check data ARGS --format json`."""
    return ["check", "data", *args, "--format", "json"]


@command("healthy")
def _healthy(tmp: Path, tinylm_dir: Path) -> list[Any]:
    train, val = write_jsonl(tmp / "train.jsonl", TRAIN), write_jsonl(tmp / "eval.jsonl", EVAL)
    served = [{"messages": c["messages"][:1]} for c in CONVERSATIONS[200:230]]
    serving = write_jsonl(tmp / "prompts.jsonl", served)
    return json_check(
        train, "--val", val, "--serving", serving, "--tokenizer", tinylm_dir, "--max-length", "256"
    )


@command("copied")
def _copied(tmp: Path, tinylm_dir: Path) -> list[Any]:
    train = write_jsonl(tmp / "train.jsonl", TRAIN)
    return json_check(train, "--val", write_jsonl(tmp / "copied.jsonl", EVAL[:30] + TRAIN[:20]))


@command("near")
def _near(tmp: Path, tinylm_dir: Path) -> list[Any]:
    def shouted(row: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [{**m, "content": f"  {m['content'].upper()}\n"} for m in row["messages"]]}

    train = write_jsonl(tmp / "train.jsonl", TRAIN)
    return json_check(
        train, "--val", write_jsonl(tmp / "near.jsonl", EVAL[:30] + [shouted(r) for r in TRAIN[:20]])
    )


@command("repeats")
def _repeats(tmp: Path, tinylm_dir: Path) -> list[Any]:
    rows = list(distinct(tinylm.instructions(400))[:100])
    rows = rows + rows[:10] + [{"prompt": "Name a colour.", "completion": "  "}]
    return json_check(write_jsonl(tmp / "train.jsonl", rows))


@command("max-length-18")
def _max_length_18(tmp: Path, tinylm_dir: Path) -> list[Any]:
    return json_check(
        write_jsonl(tmp / "train.jsonl", TRAIN), "--tokenizer", tinylm_dir, "--max-length", "18"
    )


@command("alpaca-text")
def _alpaca_text(tmp: Path, tinylm_dir: Path) -> list[Any]:
    texts = [{"text": alpaca(r)} for r in distinct(tinylm.instructions(400))[:120]]
    return json_check(write_jsonl(tmp / "train.jsonl", texts), "--tokenizer", tinylm_dir)


@command("alpaca-served")
def _alpaca_served(tmp: Path, tinylm_dir: Path) -> list[Any]:
    train = write_jsonl(tmp / "train.jsonl", TRAIN)
    prompts = [{"prompt": alpaca(r, answer=False)} for r in tinylm.instructions(30, seed=5)]
    return json_check(
        train, "--serving", write_jsonl(tmp / "prompts.jsonl", prompts), "--tokenizer", tinylm_dir
    )


def _known_train(tmp: Path) -> tuple[Path, list[dict[str, Any]]]:
    rows = distinct(tinylm.instructions(400))
    return write_jsonl(tmp / "train.jsonl", [{"text": alpaca(r)} for r in rows[:100]]), rows[100:130]


@command("known-chatml")
def _known_chatml(tmp: Path, tinylm_dir: Path) -> list[Any]:
    train, rows = _known_train(tmp)
    chatml = [{"prompt": f"<|im_start|>user\n{r['prompt']}<|im_end|>\n<|im_start|>assistant\n"} for r in rows]
    return json_check(train, "--serving", write_jsonl(tmp / "prompts.jsonl", chatml))


@command("known-same")
def _known_same(tmp: Path, tinylm_dir: Path) -> list[Any]:
    train, rows = _known_train(tmp)
    alpaca_prompts = [{"prompt": alpaca(r, answer=False)} for r in rows]
    return json_check(train, "--serving", write_jsonl(tmp / "same.jsonl", alpaca_prompts))


@command("parquet")
def _parquet(tmp: Path, tinylm_dir: Path) -> list[Any] | None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return None  # its test is skipped

    def split(row: dict[str, Any]) -> dict[str, Any]:
        return {"prompt": row["messages"][:1], "completion": row["messages"][1:]}

    pq.write_table(pa.Table.from_pylist([split(r) for r in TRAIN]), tmp / "train.parquet")
    pq.write_table(pa.Table.from_pylist([split(r) for r in EVAL[:40] + TRAIN[:10]]), tmp / "eval.parquet")
    return json_check(
        tmp / "train.parquet", "--val", tmp / "eval.parquet", "--tokenizer", tinylm_dir, "--max-length", "18"
    )


@command("no-eos-template")
def _no_eos_template(tmp: Path, tinylm_dir: Path) -> list[Any]:
    """The same tokenizer with a template that closes turns with a newline, not `<|im_end|>`."""
    folder = tmp / "tokenizer"
    folder.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        if (tinylm_dir / name).exists():
            (folder / name).write_bytes((tinylm_dir / name).read_bytes())
    template = tinylm.CHAT_TEMPLATE.replace("'<|im_end|>' + '\n'", "'\n'")
    assert template != tinylm.CHAT_TEMPLATE
    (folder / "chat_template.jinja").write_text(template)
    return json_check(write_jsonl(tmp / "train.jsonl", TRAIN), "--tokenizer", folder, "--max-length", "256")


@command("trl-max-length-20")
def _trl_max_length_20(tmp: Path, tinylm_dir: Path) -> list[Any]:
    return json_check(
        write_jsonl(tmp / "train.jsonl", DROPPED_ROWS), "--tokenizer", tinylm_dir, "--max-length", "20"
    )


@command("table")
def _table(tmp: Path, tinylm_dir: Path) -> list[Any]:
    (tmp / "train.jsonl").write_text(
        "".join(json.dumps({"text": f"t{i % 7}", "y": i % 2}) + "\n" for i in range(60))
    )
    return ["check", "data", tmp / "train.jsonl", "--label", "y"]


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory, tinylm_dir: Path) -> dict[str, dict[str, Any]]:
    """Every COMMAND run in one child: its exit status, stdout and stderr, by name."""
    tmp = tmp_path_factory.mktemp("finetune")
    commands = {}
    for name, build in COMMANDS.items():
        (tmp / name).mkdir()
        args = build(tmp / name, tinylm_dir)
        if args is not None:
            commands[name] = [str(arg) for arg in args]
    (tmp / "commands.json").write_text(json.dumps(commands))
    result = subprocess.run(
        [sys.executable, str(HERE / "run_checks.py"), str(tmp / "commands.json"), str(tmp / "results.json")],
        capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL, check=False,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "120"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    results: dict[str, dict[str, Any]] = json.loads((tmp / "results.json").read_text())
    assert list(results) == list(commands)
    return results


def check(
    checked: dict[str, dict[str, Any]], name: str
) -> tuple[int, list[dict[str, Any]], str, dict[str, Any]]:
    """Exit code, JSON findings, stdout + stderr, and the summary of the `trainmedic check data
    ... --format json` command `name`."""
    result = checked[name]
    output = result["stdout"] + result["stderr"]
    assert result["returncode"] in (0, 1), output
    document = json.loads(result["stdout"])
    return result["returncode"], document["findings"], output, document["summary"]


def codes(findings: list[dict[str, Any]]) -> list[str]:
    return [f["code"] for f in findings]


def test_a_healthy_pair_with_its_tokenizer_and_serving_is_quiet(checked: dict[str, dict[str, Any]]) -> None:
    rc, findings, output, summary = check(checked, "healthy")
    assert (rc, findings) == (0, []), output
    assert summary["formats"] == {"train": "messages", "val": "messages", "serving": "messages"}


def test_eval_rows_copied_from_train_are_contamination(checked: dict[str, dict[str, Any]]) -> None:
    rc, findings, output, _ = check(checked, "copied")
    assert codes(findings) == ["DAT001"], output
    evidence = findings[0]["evidence"]
    assert evidence["examples"] == 20
    assert evidence["lines"] == {"val": list(range(31, 41))}  # the JSONL's line numbers
    assert evidence["compared"] == "conversation"
    assert not {"features_compared", "feature_space_combinations", "p_value"} & set(evidence)
    assert findings[0]["message"] == (
        "20 of 50 val examples (40.0%) are also in train, the same conversation word for word "
        "(val lines 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, ... (20 in all))"
    )
    assert "drop_duplicates" not in findings[0]["fix"]
    assert rc == 1  # an error

    rc, findings, output, _ = check(checked, "near")
    assert codes(findings) == ["DAT002"], output
    assert findings[0]["evidence"]["examples"] == 20


def test_repeats_and_empty_completions_within_a_split(checked: dict[str, dict[str, Any]]) -> None:
    _rc, findings, output, _ = check(checked, "repeats")
    by_code = {f["code"]: f for f in findings}
    assert set(by_code) == {"DAT007", "DAT008"}, output
    repeats, empty = by_code["DAT007"], by_code["DAT008"]
    assert repeats["evidence"]["repeated_examples"] == 10
    assert repeats["evidence"]["lines"] == list(range(101, 111))
    assert repeats["message"].startswith("10 of 111 train examples (9.0%) repeat an earlier example")
    assert "drop_duplicates" not in repeats["fix"]
    assert "p_value" not in repeats["evidence"]
    # an empty completion is a warning about an example, not a missing label of a table
    assert empty["severity"] == "warning"
    assert empty["evidence"]["lines"] == [111]
    assert empty["evidence"]["part"] == "completion"
    assert empty["message"] == "1 of 111 train examples (0.9%) has an empty completion (line 111)"
    assert "label" not in empty["message"] + empty["fix"]


def test_a_max_length_shorter_than_most_examples_cuts_completions(checked: dict[str, dict[str, Any]]) -> None:
    _rc, findings, output, _ = check(checked, "max-length-18")
    assert codes(findings) == ["DAT017"], output
    evidence = findings[0]["evidence"]
    assert evidence["examples"] == 150
    assert evidence["max_length"] == 18
    lost = evidence["cut"] + evidence["dropped"]
    assert lost > 75
    assert evidence["longest_tokens"] > 18
    assert f"{lost} of 150 examples ({lost / 150:.1%}) lose their completion at max_length 18" in output


def test_alpaca_text_against_the_tokenizers_chatml(checked: dict[str, dict[str, Any]]) -> None:
    _rc, findings, output, _ = check(checked, "alpaca-text")
    assert codes(findings) == ["DAT016"], output
    evidence = findings[0]["evidence"]
    assert evidence["train_format"] == "Alpaca"
    assert evidence["tokenizer_template"] == "ChatML"
    assert evidence["with_template"] == 0
    assert "<|im_start|>assistant" in evidence["tokenizer_markers"][0]


def test_training_in_chatml_serving_alpaca_prompts(checked: dict[str, dict[str, Any]]) -> None:
    _rc, findings, output, _ = check(checked, "alpaca-served")
    assert codes(findings) == ["DAT016"], output
    evidence = findings[0]["evidence"]
    assert evidence["train_format"] == dat016.TOKENIZER_TEMPLATE
    assert evidence["serving_format"] == "Alpaca"
    assert evidence["served_sample"].startswith("### Instruction:")
    assert evidence["train_sample"].startswith("<|im_start|>user")


def test_without_a_tokenizer_known_formats_are_compared(checked: dict[str, dict[str, Any]]) -> None:
    _, findings, output, _ = check(checked, "known-chatml")
    assert codes(findings) == ["DAT016"], output
    assert findings[0]["evidence"]["serving_format"] == "ChatML"
    _, findings, output, _ = check(checked, "known-same")
    assert findings == [], output


def test_parquet_conversational_prompt_completion(checked: dict[str, dict[str, Any]]) -> None:
    pytest.importorskip("pyarrow")
    _rc, findings, output, _ = check(checked, "parquet")
    assert sorted(codes(findings)) == ["DAT001", "DAT017", "DAT017"], output
    overlap = next(f for f in findings if f["code"] == "DAT001")["evidence"]
    assert overlap["examples"] == 10
    assert overlap["rows"] == {"val": list(range(41, 51))}  # a Parquet file's row numbers


def test_a_template_that_never_renders_eos_is_noted(checked: dict[str, dict[str, Any]]) -> None:
    """The same tokenizer with a template that closes turns with a newline, not `<|im_end|>`."""
    _, findings, output, summary = check(checked, "no-eos-template")
    assert findings == [], output
    assert any("150 of 150 examples have no EOS token ('<|im_end|>')" in n for n in summary["notes"]), output


@pytest.mark.parametrize(
    ("content", "args", "expected"),
    [
        ('{"messages": []}\nnot json\n', (), "line 2: not JSON"),
        ('{"prompt": "a", "completion": "b"}\n{"prompt": "c"}\n', (), "row 2: no 'completion'"),
        (
            '{"question": "a", "answer": "b"}\n',
            ("--max-length", "8", "--tokenizer", "."),
            "expected rows with 'messages'",
        ),
        (
            '{"messages": []}\n',
            ("--tokenizer", "no-such-folder"),
            "--tokenizer no-such-folder: no such folder",
        ),
        ('{"messages": []}\n', ("--max-length", "8"), "--max-length needs --tokenizer"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, content: str, args: tuple[str, ...], expected: str
) -> None:
    path = tmp_path / "train.jsonl"
    path.write_text(content)
    result = run_cli("check", "data", str(path), *args)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert expected in lines[0], result.stderr


def test_a_table_keeps_the_tabular_checks(checked: dict[str, dict[str, Any]]) -> None:
    result = checked["table"]
    assert result["returncode"] in (0, 1), result["stdout"] + result["stderr"]
    assert "label 'y'" in result["stdout"], result["stdout"]


@pytest.mark.parametrize(("cut", "dropped", "fires"), [(2, 0, False), (8, 2, True), (0, 3, True)])
def test_the_guards_truncation_counts_pass_the_same_thresholds(cut: int, dropped: int, fires: bool) -> None:
    events = observed(
        dat017.GUARD_OBSERVATION, trainer="SFTTrainer", max_length=64, examples=200, cut=cut, dropped=dropped
    )
    assert ("DAT017" in codes([f.to_dict() for f in run_rules(RunRecord.of(events))])) is fires


@pytest.mark.parametrize(("with_template", "fires"), [(0, True), (60, False)])
def test_the_guards_template_mismatch_needs_most_examples_without_it(with_template: int, fires: bool) -> None:
    events = observed(
        dat016.GUARD_OBSERVATION,
        examples_checked=64,
        with_template=with_template,
        served_with="apply_chat_template",
        train_sample="### Instruction:\nName a colour.",
        served_sample="<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\n",
    )
    assert ("DAT016" in codes([f.to_dict() for f in run_rules(RunRecord.of(events))])) is fires


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::FutureWarning")  # SFTConfig's own deprecations
def test_the_dropped_count_is_what_trl_drops(
    checked: dict[str, dict[str, Any]], tmp_path: Path, tinylm_dir: Path
) -> None:
    """SFTTrainer prepares the same file with max_length=20: the examples it drops as fully masked
    are the ones DAT017 counts as losing their whole completion."""
    pytest.importorskip("trl")
    _, findings, output, _ = check(checked, "trl-max-length-20")
    assert codes(findings) == ["DAT017"], output
    dropped_by_trl = trl_dropped("SFT", DROPPED_ROWS, tinylm_dir, tmp_path / "out", max_length=20)
    assert dropped_by_trl > 0
    assert findings[0]["evidence"]["dropped"] == dropped_by_trl
