"""`trainmedic check data` on fine-tuning data sets (JSONL/Parquet in TRL's formats), through
the real CLI, with the tiny chat model's tokenizer (ChatML) and its synthetic tasks; and the
guard-side DAT016/DAT017 rules' thresholds."""

from __future__ import annotations

import json
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


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


SUMMARY: dict[str, Any] = {}


def check(*args: str | Path) -> tuple[int, list[dict[str, Any]], str]:
    """Exit code, JSON findings, and stdout + stderr of `trainmedic check data ... --format json`
    (the summary of the last run in SUMMARY)."""
    result = run_cli("check", "data", *map(str, args), "--format", "json")
    output = result.stdout + result.stderr
    assert result.returncode in (0, 1), output
    document = json.loads(result.stdout)
    SUMMARY.clear()
    SUMMARY.update(document["summary"])
    return result.returncode, document["findings"], output


def codes(findings: list[dict[str, Any]]) -> list[str]:
    return [f["code"] for f in findings]


def alpaca(row: dict[str, str], *, answer: bool = True) -> str:
    return f"### Instruction:\n{row['prompt']}\n\n### Response:\n" + (row["completion"] if answer else "")


def test_a_healthy_pair_with_its_tokenizer_and_serving_is_quiet(tmp_path: Path, tinylm_dir: Path) -> None:
    train, val = write_jsonl(tmp_path / "train.jsonl", TRAIN), write_jsonl(tmp_path / "eval.jsonl", EVAL)
    served = [{"messages": c["messages"][:1]} for c in CONVERSATIONS[200:230]]
    serving = write_jsonl(tmp_path / "prompts.jsonl", served)
    rc, findings, output = check(
        train, "--val", val, "--serving", serving, "--tokenizer", tinylm_dir, "--max-length", "256"
    )
    assert (rc, findings) == (0, []), output
    assert SUMMARY["formats"] == {"train": "messages", "val": "messages", "serving": "messages"}


def test_eval_rows_copied_from_train_are_contamination(tmp_path: Path) -> None:
    train = write_jsonl(tmp_path / "train.jsonl", TRAIN)
    copied = write_jsonl(tmp_path / "copied.jsonl", EVAL[:30] + TRAIN[:20])
    rc, findings, output = check(train, "--val", copied)
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

    def shouted(row: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [{**m, "content": f"  {m['content'].upper()}\n"} for m in row["messages"]]}

    near = write_jsonl(tmp_path / "near.jsonl", EVAL[:30] + [shouted(r) for r in TRAIN[:20]])
    rc, findings, output = check(train, "--val", near)
    assert codes(findings) == ["DAT002"], output
    assert findings[0]["evidence"]["examples"] == 20


def test_repeats_and_empty_completions_within_a_split(tmp_path: Path) -> None:
    rows = list(distinct(tinylm.instructions(400))[:100])
    rows = rows + rows[:10] + [{"prompt": "Name a colour.", "completion": "  "}]
    _rc, findings, output = check(write_jsonl(tmp_path / "train.jsonl", rows))
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


def test_a_max_length_shorter_than_most_examples_cuts_completions(tmp_path: Path, tinylm_dir: Path) -> None:
    train = write_jsonl(tmp_path / "train.jsonl", TRAIN)
    _rc, findings, output = check(train, "--tokenizer", tinylm_dir, "--max-length", "18")
    assert codes(findings) == ["DAT017"], output
    evidence = findings[0]["evidence"]
    assert evidence["examples"] == 150
    assert evidence["max_length"] == 18
    lost = evidence["cut"] + evidence["dropped"]
    assert lost > 75
    assert evidence["longest_tokens"] > 18
    assert f"{lost} of 150 examples ({lost / 150:.1%}) lose their completion at max_length 18" in output


def test_alpaca_text_against_the_tokenizers_chatml(tmp_path: Path, tinylm_dir: Path) -> None:
    texts = [{"text": alpaca(r)} for r in distinct(tinylm.instructions(400))[:120]]
    _rc, findings, output = check(write_jsonl(tmp_path / "train.jsonl", texts), "--tokenizer", tinylm_dir)
    assert codes(findings) == ["DAT016"], output
    evidence = findings[0]["evidence"]
    assert evidence["train_format"] == "Alpaca"
    assert evidence["tokenizer_template"] == "ChatML"
    assert evidence["with_template"] == 0
    assert "<|im_start|>assistant" in evidence["tokenizer_markers"][0]


def test_training_in_chatml_serving_alpaca_prompts(tmp_path: Path, tinylm_dir: Path) -> None:
    train = write_jsonl(tmp_path / "train.jsonl", TRAIN)
    prompts = [{"prompt": alpaca(r, answer=False)} for r in tinylm.instructions(30, seed=5)]
    serving = write_jsonl(tmp_path / "prompts.jsonl", prompts)
    _rc, findings, output = check(train, "--serving", serving, "--tokenizer", tinylm_dir)
    assert codes(findings) == ["DAT016"], output
    evidence = findings[0]["evidence"]
    assert evidence["train_format"] == dat016.TOKENIZER_TEMPLATE
    assert evidence["serving_format"] == "Alpaca"
    assert evidence["served_sample"].startswith("### Instruction:")
    assert evidence["train_sample"].startswith("<|im_start|>user")


def test_without_a_tokenizer_known_formats_are_compared(tmp_path: Path) -> None:
    rows = distinct(tinylm.instructions(400))
    train = write_jsonl(tmp_path / "train.jsonl", [{"text": alpaca(r)} for r in rows[:100]])
    chatml = [
        {"prompt": f"<|im_start|>user\n{r['prompt']}<|im_end|>\n<|im_start|>assistant\n"}
        for r in rows[100:130]
    ]
    _, findings, output = check(train, "--serving", write_jsonl(tmp_path / "prompts.jsonl", chatml))
    assert codes(findings) == ["DAT016"], output
    assert findings[0]["evidence"]["serving_format"] == "ChatML"
    alpaca_prompts = [{"prompt": alpaca(r, answer=False)} for r in rows[100:130]]
    _, findings, output = check(train, "--serving", write_jsonl(tmp_path / "same.jsonl", alpaca_prompts))
    assert findings == [], output


def test_parquet_conversational_prompt_completion(tmp_path: Path, tinylm_dir: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")

    def split(row: dict[str, Any]) -> dict[str, Any]:
        return {"prompt": row["messages"][:1], "completion": row["messages"][1:]}

    pq.write_table(pa.Table.from_pylist([split(r) for r in TRAIN]), tmp_path / "train.parquet")
    pq.write_table(
        pa.Table.from_pylist([split(r) for r in EVAL[:40] + TRAIN[:10]]), tmp_path / "eval.parquet"
    )
    _rc, findings, output = check(
        tmp_path / "train.parquet",
        "--val",
        tmp_path / "eval.parquet",
        "--tokenizer",
        tinylm_dir,
        "--max-length",
        "18",
    )
    assert sorted(codes(findings)) == ["DAT001", "DAT017", "DAT017"], output
    overlap = next(f for f in findings if f["code"] == "DAT001")["evidence"]
    assert overlap["examples"] == 10
    assert overlap["rows"] == {"val": list(range(41, 51))}  # a Parquet file's row numbers


@pytest.mark.slow
def test_a_template_that_never_renders_eos_is_noted(tmp_path: Path, tinylm_dir: Path) -> None:
    """The same tokenizer with a template that closes turns with a newline, not `<|im_end|>`."""
    folder = tmp_path / "tokenizer"
    folder.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        if (tinylm_dir / name).exists():
            (folder / name).write_bytes((tinylm_dir / name).read_bytes())
    template = tinylm.CHAT_TEMPLATE.replace("'<|im_end|>' + '\n'", "'\n'")
    assert template != tinylm.CHAT_TEMPLATE
    (folder / "chat_template.jinja").write_text(template)
    train = write_jsonl(tmp_path / "train.jsonl", TRAIN)
    _, findings, output = check(train, "--tokenizer", folder, "--max-length", "256")
    assert findings == [], output
    assert any("150 of 150 examples have no EOS token ('<|im_end|>')" in n for n in SUMMARY["notes"]), output


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


def test_a_table_keeps_the_tabular_checks(tmp_path: Path) -> None:
    (tmp_path / "train.jsonl").write_text(
        "".join(json.dumps({"text": f"t{i % 7}", "y": i % 2}) + "\n" for i in range(60))
    )
    result = run_cli("check", "data", str(tmp_path / "train.jsonl"), "--label", "y")
    assert result.returncode in (0, 1), result.stdout + result.stderr
    assert "label 'y'" in result.stdout, result.stdout


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
def test_the_dropped_count_is_what_trl_drops(tmp_path: Path, tinylm_dir: Path) -> None:
    """SFTTrainer prepares the same file with max_length=20: the examples it drops as fully masked
    are the ones DAT017 counts as losing their whole completion."""
    pytest.importorskip("trl")
    rows = [{"prompt": r["messages"][:1], "completion": r["messages"][1:]} for r in TRAIN]
    _, findings, output = check(
        write_jsonl(tmp_path / "train.jsonl", rows), "--tokenizer", tinylm_dir, "--max-length", "20"
    )
    assert codes(findings) == ["DAT017"], output
    dropped_by_trl = trl_dropped("SFT", rows, tinylm_dir, tmp_path / "out", max_length=20)
    assert dropped_by_trl > 0
    assert findings[0]["evidence"]["dropped"] == dropped_by_trl
