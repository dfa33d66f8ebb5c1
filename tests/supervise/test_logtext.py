from __future__ import annotations

from trainmedic.rules import _logtext as L


def test_traceback_last_of_chained() -> None:
    lines = [
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in <module>',
        "KeyError: 'x'",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "b.py", line 2, in f',
        "RuntimeError: wrapped",
    ]
    tb = L.parse_traceback(lines)
    assert tb is not None
    assert (tb.exc_type, tb.message, str(tb.user_frame)) == ("RuntimeError", "wrapped", "b.py:2 in f")


def test_no_traceback() -> None:
    assert L.parse_traceback(["all good"]) is None


def test_epoch_progress_and_phases() -> None:
    assert L.epoch_progress(["Epoch 1/12", "x", "Epoch 3/12"]) == (3, 12)
    assert L.phase_of_line("Epoch 3/12") == ("train", 3)
    assert L.phase_of_line("***** Running Evaluation *****") == ("eval", None)
    assert L.phase_of_line("Validation DataLoader 0: 100%|") == ("eval", None)
    assert L.phase_of_line("Saving model checkpoint to out/checkpoint-500") == ("checkpoint", None)
    assert L.phase_of_line("Epoch 0: 100%|##########| 32/32 [00:01<00:00, train_loss=0.5]") == ("train", 0)
    assert L.phase_of_line("step 5 loss 0.3") is None


def test_error_texts() -> None:
    assert L.ACCELERATOR_OOM.search("tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM")
    assert L.INPUT_EXHAUSTED.search("Your input ran out of data; interrupting training.")
    assert not L.INPUT_EXHAUSTED.search("Epoch 1/3")
