from __future__ import annotations

from trainmedic.evidence import logtext as L


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


def test_foreign_lines_inside_a_traceback_are_skipped() -> None:
    lines = [
        "Traceback (most recent call last):",
        '  File "t.py", line 3, in <module>',
        "loss 8.000",
        "done",
        "ValueError: bad shape",
    ]
    tb = L.parse_traceback(lines)
    assert tb is not None
    assert (tb.exc_type, tb.message) == ("ValueError", "bad shape")
    bare = L.parse_traceback([*lines[:2], "KeyboardInterrupt"])
    assert bare is not None
    assert bare.exc_type == "KeyboardInterrupt"


def test_no_traceback() -> None:
    assert L.parse_traceback(["all good"]) is None


def test_epoch_progress_and_phases() -> None:
    assert L.epoch_progress(["Epoch 1/12", "x", "Epoch 3/12"]) == (3, 12)
    assert L.phase_of_line("Epoch 3/12") == ("train", 2)  # events count epochs from 0
    assert L.phase_of_line("***** Running Evaluation *****") == ("eval", None)
    assert L.phase_of_line("Validation DataLoader 0: 100%|") == ("eval", None)
    assert L.phase_of_line("Saving model checkpoint to out/checkpoint-500") == ("checkpoint", None)
    assert L.phase_of_line("Epoch 0: 100%|##########| 32/32 [00:01<00:00, train_loss=0.5]") == ("train", 0)
    assert L.phase_of_line("{'loss': 0.6931, 'grad_norm': 1.2, 'learning_rate': 5e-05, 'epoch': 0.5}") == (
        "train",
        None,
    )
    assert L.phase_of_line("{'eval_loss': 0.52, 'eval_runtime': 0.3, 'epoch': 1.0}") == ("train", None)
    assert L.phase_of_line("step 5 loss 0.3") is None


def test_error_texts() -> None:
    assert L.ACCELERATOR_OOM.search("tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM")
    assert L.INPUT_EXHAUSTED.search("Your input ran out of data; interrupting training.")
    assert not L.INPUT_EXHAUSTED.search("Epoch 1/3")


def test_trainmedic_s_own_wrapper_is_not_the_user_s_frame() -> None:
    """A crash inside Keras' fit passes through trainmedic's wrapper of fit, wherever trainmedic
    is installed (here: editable, outside site-packages): the user's line is the one before."""
    from pathlib import Path

    import trainmedic

    wrapper = Path(trainmedic.__file__).parent / "keras" / "_auto.py"
    lines = [
        "Traceback (most recent call last):",
        '  File "/home/me/project/train.py", line 85, in <module>',
        f'  File "{wrapper}", line 108, in fit',
        '  File "/venv/lib/python3.11/site-packages/keras/src/trainer.py", line 122, in fit',
        "ValueError: empty batch",
    ]
    tb = L.parse_traceback(lines)
    assert tb is not None
    assert str(tb.user_frame) == "/home/me/project/train.py:85 in <module>"


def test_a_script_beside_trainmedic_s_package_is_the_user_s_code() -> None:
    """Only trainmedic's own package folder is skipped, not the folder that holds it (an
    editable install in a project's `src/`, beside the user's own modules)."""
    from pathlib import Path

    import trainmedic

    package = Path(trainmedic.__file__).parent
    assert not L.Frame(file=str(package / "keras" / "_auto.py"), line=108, function="fit").is_user_code
    beside = L.Frame(file=str(package.parent / "train.py"), line=85, function="<module>")
    assert beside.is_user_code == ("site-packages" not in str(package))
