"""`trainmedic check data` on preference sets (TRL's `prompt`/`chosen`/`rejected`, plain or
conversational, JSONL and Parquet), through the real CLI: identical pairs (DAT018), length bias
(DAT019), double BOS with a tokenizer whose chat template writes BOS (DAT020), and the content
and truncation checks spoken in pairs. The pairs are tinylm's synthetic tasks, written as the
failure benchmark's preference cases write them (benchmarks/failures/make_preference.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from benchmarks.failures.make_preference import (
    healthy,
    identical,
    length_biased,
    rendered_prompts,
    write_jsonl,
)

from trainmedic.evidence.examples import Located
from trainmedic.rules.dat import dat018_identical_preference_pairs as dat018
from trainmedic.rules.dat import dat019_preference_length_bias as dat019

from ..conftest import load_tinylm, run_cli, trl_dropped

tinylm = load_tinylm()

#: 360 pairs with distinct prompts, the chosen longer in about 60 % of them: a healthy set.
TRAIN, EVAL = healthy()


def check(*args: str | Path) -> tuple[int, dict[str, Any], list[dict[str, Any]], str]:
    """Exit code, summary, findings, and stdout + stderr of `check data ... --format json`."""
    result = run_cli("check", "data", *map(str, args), "--format", "json")
    output = result.stdout + result.stderr
    assert result.returncode in (0, 1), output
    document = json.loads(result.stdout)
    return result.returncode, document["summary"], document["findings"], output


def codes(findings: list[dict[str, Any]]) -> list[str]:
    return sorted(f["code"] for f in findings)


def test_a_healthy_preference_set_is_quiet_plain_and_conversational(tmp_path: Path) -> None:
    share = sum(len(p["chosen"]) > len(p["rejected"]) for p in TRAIN) / len(TRAIN)
    assert 0.55 < share < 0.65  # longer answers often win: a tendency, not a rule
    train, val = write_jsonl(tmp_path / "train.jsonl", TRAIN), write_jsonl(tmp_path / "eval.jsonl", EVAL)
    rc, summary, findings, output = check(train, "--val", val)
    assert (rc, findings) == (0, []), output
    assert summary["formats"] == {"train": "preference", "val": "preference"}
    chats = write_jsonl(tmp_path / "chats.jsonl", [tinylm.conversational(p) for p in TRAIN])
    rc, summary, findings, output = check(chats)
    assert (rc, findings) == (0, []), output
    assert summary["formats"] == {"train": "conversational preference"}


def test_pairs_whose_rejected_is_the_chosen_are_dat018(tmp_path: Path) -> None:
    """The issue's numbers: 238 of 728 pairs with chosen == rejected, from a join gone wrong."""
    _rc, _summary, findings, output = check(write_jsonl(tmp_path / "prefs.jsonl", identical()))
    assert codes(findings) == ["DAT018"], output
    found = findings[0]
    assert found["severity"] == "warning"
    assert found["evidence"]["identical_pairs"] == 238
    assert found["evidence"]["word_for_word"] == 238
    assert found["evidence"]["fraction"] == round(238 / 728, 6)
    assert found["evidence"]["lines"] == [1 + 3 * i for i in range(10)]  # the JSONL's line numbers
    assert found["message"].startswith("238 of 728 train pairs (32.7%) have the same chosen and rejected")
    assert "DPOTrainer" in found["fix"]


def test_conversational_pairs_equal_up_to_case_and_spacing_are_dat018(tmp_path: Path) -> None:
    """Message lists compared by their content: an assistant turn re-cased and re-spaced."""
    rows = [tinylm.conversational(p) for p in TRAIN[:100]]
    for row in rows[:12]:
        text = row["chosen"][0]["content"]
        row["rejected"] = [{"role": "assistant", "content": f"  {text.upper()}\n"}]
    for row in rows[12:15]:
        row["rejected"] = row["chosen"]
    _rc, _summary, findings, output = check(write_jsonl(tmp_path / "chats.jsonl", rows))
    assert codes(findings) == ["DAT018"], output
    evidence = findings[0]["evidence"]
    assert (evidence["word_for_word"], evidence["up_to_case_and_whitespace"]) == (3, 12)
    assert evidence["lines"] == list(range(1, 11))


def test_chosen_longer_in_nearly_all_pairs_is_dat019(tmp_path: Path) -> None:
    _rc, _summary, findings, output = check(write_jsonl(tmp_path / "prefs.jsonl", length_biased()))
    assert codes(findings) == ["DAT019"], output
    evidence = findings[0]["evidence"]
    assert evidence["chosen_longer_share"] > 0.9
    assert evidence["median_length_ratio"] > 1.2
    assert evidence["sign_test_p_value"] < 1e-6
    assert evidence["chosen_longer"] + evidence["rejected_longer"] + evidence["equal_length"] == 300
    assert "length alone predicts the preference" in findings[0]["message"]
    assert "ld_alpha" in findings[0]["fix"]


@pytest.mark.parametrize(
    ("longer", "decided", "fires"),
    [
        (10, 10, False),  # every pair, but ten pairs are a smoke test
        (17, 20, False),  # 85 %, yet P = 0.0013 under 50 %: not beyond chance
        (18, 20, True),  # 90 %, P = 0.0002
        (600, 1000, False),  # a healthy tendency, far beyond chance but under the floor
        (790, 1000, False),
        (810, 1000, True),
    ],
)
def test_length_bias_needs_the_floor_the_test_and_enough_pairs(
    longer: int, decided: int, fires: bool
) -> None:
    evidence = dat019.LengthBias("train", decided, longer, decided - longer, 1.5, 300.0, 200.0)
    assert bool(dat019.judge(evidence)) is fires


def test_the_sign_test_is_the_binomial_tail() -> None:
    assert dat019.sign_test(20, 20) == pytest.approx(0.5**20)
    assert dat019.sign_test(17, 20) == pytest.approx((1140 + 190 + 20 + 1) / 2**20)
    assert dat019.sign_test(0, 20) == 1.0
    assert dat019.sign_test(60_000, 100_000) < 1e-100  # large sets: no overflow, no error


def test_no_identical_pair_no_finding() -> None:
    evidence = dat018.IdenticalPairs("train", 50, 0, 0, Located("line", [], 0))
    assert dat018.judge(evidence) == []


def test_the_existing_checks_speak_of_pairs_and_prompts(tmp_path: Path) -> None:
    """Conversational pairs (where `check data` stopped with `unhashable type: 'list'`): eval
    prompts copied from train, a pair repeated, an empty rejected response."""
    train_rows = [tinylm.conversational(p) for p in TRAIN[:100]]
    train_rows += train_rows[:4]  # lines 101-104 repeat lines 1-4
    train_rows[50]["rejected"] = [{"role": "assistant", "content": " "}]  # line 51
    eval_rows = [tinylm.conversational(p) for p in EVAL[:30]]
    eval_rows += [
        {**tinylm.conversational(p), "chosen": [{"role": "assistant", "content": "other"}]}
        for p in TRAIN[60:70]
    ]
    rc, _summary, findings, output = check(
        write_jsonl(tmp_path / "train.jsonl", train_rows),
        "--val",
        write_jsonl(tmp_path / "eval.jsonl", eval_rows),
    )
    assert "Traceback" not in output
    by_code = {f["code"]: f for f in findings}
    assert sorted(by_code) == ["DAT001", "DAT007", "DAT008"], output
    overlap = by_code["DAT001"]
    assert overlap["evidence"]["compared"] == "prompt"
    assert overlap["evidence"]["lines"] == {"val": list(range(31, 41))}
    assert overlap["message"] == (
        "10 of 40 val pairs (25.0%) are also in train, the same prompt word for word "
        "(val lines 31, 32, 33, 34, 35, 36, 37, 38, 39, 40)"
    )
    assert "reward accuracies" in overlap["fix"]
    assert rc == 1  # contamination is an error
    repeats = by_code["DAT007"]
    assert repeats["evidence"]["lines"] == [101, 102, 103, 104]
    assert repeats["message"].startswith("4 of 104 train pairs (3.8%) repeat an earlier pair word for word")
    empty = by_code["DAT008"]
    assert empty["evidence"]["lines"] == [51]
    assert (
        empty["message"] == "1 of 104 train pairs (1.0%) has an empty chosen or rejected response (line 51)"
    )
    assert "rejected" in empty["fix"]


def test_implicit_prompts_are_extracted_as_trl_does(tmp_path: Path) -> None:
    """No `prompt` column: the common start of chosen and rejected is the prompt."""
    rows = []
    for p in TRAIN[:40]:
        chat = tinylm.conversational(p)
        rows.append(
            {"chosen": chat["prompt"] + chat["chosen"], "rejected": chat["prompt"] + chat["rejected"]}
        )
    train = write_jsonl(tmp_path / "train.jsonl", rows)
    copied = write_jsonl(
        tmp_path / "eval.jsonl",
        [{**r, "chosen": [*r["chosen"][:1], {"role": "assistant", "content": "x"}]} for r in rows[:5]],
    )
    _rc, summary, findings, output = check(train, "--val", copied)
    assert summary["formats"]["train"] == "conversational preference"
    assert codes(findings) == ["DAT001"], output
    assert findings[0]["evidence"]["compared"] == "prompt"
    plain = [
        {"chosen": f"Is {i} even? {'Yes' if i % 2 == 0 else 'No'}.", "rejected": f"Is {i} even? Who knows."}
        for i in range(40)
    ]
    _rc, _summary, findings, output = check(write_jsonl(tmp_path / "plain.jsonl", plain))
    assert findings == [], output


def test_truncation_of_either_side_counts_pairs(tmp_path: Path, tinylm_dir: Path) -> None:
    rows = [tinylm.conversational(p) for p in TRAIN[:120]]
    _rc, _summary, findings, output = check(
        write_jsonl(tmp_path / "chats.jsonl", rows), "--tokenizer", tinylm_dir, "--max-length", "16"
    )
    assert codes(findings) == ["DAT017"], output
    evidence = findings[0]["evidence"]
    assert evidence["examples"] == 120
    assert evidence["noun"] == "pair"
    assert evidence["cut"] + evidence["dropped"] > 60
    assert "lose their chosen or rejected response at max_length 16" in findings[0]["message"]
    assert "DPOConfig(max_length" in findings[0]["fix"]
    _rc, _summary, findings, output = check(
        write_jsonl(tmp_path / "fits.jsonl", rows), "--tokenizer", tinylm_dir, "--max-length", "256"
    )
    assert findings == [], output


def test_prompts_rendered_with_a_bos_template_are_dat020(tmp_path: Path, tinylm_bos_dir: Path) -> None:
    rows = rendered_prompts(tinylm_bos_dir, TRAIN[:80])
    assert rows[0]["prompt"].startswith("<|begin_of_text|><|im_start|>user")
    _rc, _summary, findings, output = check(
        write_jsonl(tmp_path / "prefs.jsonl", rows), "--tokenizer", tinylm_bos_dir
    )
    assert codes(findings) == ["DAT020"], output
    evidence = findings[0]["evidence"]
    assert (evidence["double_bos_rows"], evidence["rows_checked"]) == (80, 80)
    assert evidence["served_bos_tokens"] == 1
    assert evidence["served_with"] == "apply_chat_template(tokenize=True)"
    assert evidence["lines"] == list(range(1, 11))
    assert findings[0]["message"].startswith("80 of 80 train pairs (100.0%) begin with two BOS tokens")
    assert "add_special_tokens=False" in findings[0]["fix"]


def test_what_dat020_counts_is_what_trl_tokenizes(tinylm_bos_dir: Path) -> None:
    """TRL's own tokenization of a plain prompt (`trl.data_utils._tokenize`, what DPOTrainer and
    SFTTrainer call) starts with two BOS; of the same prompt as messages, with one."""
    pytest.importorskip("trl")
    from transformers import AutoTokenizer
    from trl.data_utils import _tokenize

    tokenizer = AutoTokenizer.from_pretrained(tinylm_bos_dir)
    bos = tokenizer.bos_token_id
    rendered = rendered_prompts(tinylm_bos_dir, TRAIN[:1])[0]["prompt"]
    assert _tokenize(tokenizer, rendered)["input_ids"][:2] == [bos, bos]
    messages = [{"role": "user", "content": TRAIN[0]["prompt"]}]
    served = _tokenize(tokenizer, messages, add_generation_prompt=True)["input_ids"]
    assert served[0] == bos
    assert served[1] != bos


def test_no_double_bos_where_trl_renders_one(tmp_path: Path, tinylm_bos_dir: Path, tinylm_dir: Path) -> None:
    """Conversational pairs with the BOS tokenizer (TRL applies the template: one BOS, a note
    only), and the rendered prompts with a tokenizer that has no BOS: quiet."""
    chats = write_jsonl(tmp_path / "chats.jsonl", [tinylm.conversational(p) for p in TRAIN[:80]])
    _rc, summary, findings, output = check(chats, "--tokenizer", tinylm_bos_dir)
    assert findings == [], output
    assert any("add_special_tokens=False" in note for note in summary["notes"]), summary
    rendered = write_jsonl(tmp_path / "prefs.jsonl", rendered_prompts(tinylm_dir, TRAIN[:80]))
    _rc, summary, findings, output = check(rendered, "--tokenizer", tinylm_dir)
    assert findings == [], output
    assert summary["notes"] == ["truncation not measured: give --max-length N (the trainer's max_length)"]


def test_sft_text_rendered_with_a_bos_template_is_dat020_too(tmp_path: Path, tinylm_bos_dir: Path) -> None:
    """Not only pairs: SFT `text` rows rendered with the same template, as examples."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tinylm_bos_dir)
    texts = [
        {"text": tokenizer.apply_chat_template(row["messages"], tokenize=False)}
        for row in tinylm.conversations(400)[:60]
    ]
    _rc, _summary, findings, output = check(
        write_jsonl(tmp_path / "sft.jsonl", texts), "--tokenizer", tinylm_bos_dir
    )
    assert "DAT020" in codes(findings), output
    found = next(f for f in findings if f["code"] == "DAT020")
    assert found["message"].startswith("60 of 60 train examples (100.0%) begin with two BOS tokens")


def test_parquet_conversational_pairs(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [tinylm.conversational(p) for p in TRAIN[:60]]
    rows += [{**r, "rejected": r["chosen"]} for r in rows[:6]]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "train.parquet")
    _rc, summary, findings, output = check(tmp_path / "train.parquet")
    assert summary["formats"] == {"train": "conversational preference"}
    assert codes(findings) == ["DAT018"], output
    assert findings[0]["evidence"]["rows"] == list(range(61, 67))  # a Parquet file's row numbers


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        (
            [
                {
                    "prompt": "Hi",
                    "chosen": [{"role": "assistant", "content": "a"}],
                    "rejected": [{"role": "assistant", "content": "b"}],
                }
            ],
            "row 1: 'prompt' is a str; expected a list of {role, content} objects",
        ),
        (
            [{"prompt": "a", "chosen": "b", "rejected": "c"}, {"prompt": "d", "chosen": "e"}],
            "row 2: no 'rejected'",
        ),
        (
            [{"prompt": "a", "chosen": "b", "rejected": [{"role": "assistant", "content": "c"}]}],
            "row 1: 'chosen' is a str",
        ),
    ],
)
def test_bad_pairs_are_one_line_and_exit_2(tmp_path: Path, rows: list[dict[str, Any]], expected: str) -> None:
    result = run_cli("check", "data", str(write_jsonl(tmp_path / "prefs.jsonl", rows)))
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert expected in lines[0], result.stderr


def test_pairs_read_as_a_table_are_one_line_and_exit_2(tmp_path: Path) -> None:
    """A tabular role (--label) makes the file a table: its message lists are named, no traceback."""
    chats = write_jsonl(tmp_path / "chats.jsonl", [tinylm.conversational(p) for p in TRAIN[:20]])
    result = run_cli("check", "data", str(chats), "--label", "chosen")
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "column 'prompt' holds lists (e.g. chat messages)" in lines[0]


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::FutureWarning")  # DPOConfig's own deprecations
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_the_dropped_count_is_what_dpotrainer_drops(tmp_path: Path, tinylm_dir: Path) -> None:
    """DPOTrainer prepares the same pairs with max_length=20: the pairs it drops (the prompt fills
    max_length) are the ones DAT017 counts as losing their responses entirely."""
    pytest.importorskip("trl")
    rows = [tinylm.conversational(p) for p in TRAIN[:120]]
    _rc, _summary, findings, output = check(
        write_jsonl(tmp_path / "chats.jsonl", rows), "--tokenizer", tinylm_dir, "--max-length", "20"
    )
    assert codes(findings) == ["DAT017"], output
    dropped_by_trl = trl_dropped("DPO", rows, tinylm_dir, tmp_path / "out", max_length=20)
    assert 0 < dropped_by_trl < len(rows)
    assert findings[0]["evidence"]["dropped"] == dropped_by_trl
