"""KER rules and check_sequence on hand-made events and duck-typed sequences (no Keras, fast)."""

from __future__ import annotations

import sys

import pytest

from trainmedic.events import Epoch, GuardObservation
from trainmedic.evidence.observations import KERAS_INPUT
from trainmedic.keras import check_sequence
from trainmedic.record import RunRecord
from trainmedic.rules.ker.ker001_sequence_too_short import sequence_too_short
from trainmedic.rules.ker.ker002_sequence_len_huge import sequence_len_huge
from trainmedic.rules.ker.ker003_history_epochs_mismatch import OBSERVATION as FIT_END_OBSERVATION
from trainmedic.rules.ker.ker003_history_epochs_mismatch import history_epochs_mismatch
from trainmedic.rules.ker.ker004_single_unit_softmax import OBSERVATION as OUTPUT_OBSERVATION
from trainmedic.rules.ker.ker004_single_unit_softmax import single_unit_softmax

GIB = 2**30


def seq_input(t: float = 1.0, **data: object) -> GuardObservation:
    base = {"is_sequence": True, "input_type": "Batches", "shuffle": True, "memory_bytes": 16 * GIB}
    base.update(data)
    if isinstance(base.get("sequence_len"), int):
        base.setdefault("index_bytes", 36 * base["sequence_len"])  # type: ignore[operator]
    return GuardObservation(check=KERAS_INPUT, data=base, t=t, pid=1)


def fit_end(t: float = 9.0, **data: object) -> GuardObservation:
    base = {"completed": True, "epochs_requested": 3, "epochs_run": 3, "stopped_by": None}
    base.update(data)
    return GuardObservation(check=FIT_END_OBSERVATION, data=base, t=t, pid=1)


def test_short_sequence_against_its_samples() -> None:
    record = RunRecord.of(
        [seq_input(sequence_len=2, samples=640, batch_size=32), Epoch(epoch=0, steps=2, t=2, pid=1)]
    )
    (finding,) = sequence_too_short(record)
    assert finding.message == "Batches yields 2 batches per epoch; its 640 samples at batch size 32 make 20"
    assert finding.evidence["expected_batches"] == 20
    assert finding.evidence["batches_per_epoch"] == [2]


def test_short_sequence_against_steps_per_epoch() -> None:
    (finding,) = sequence_too_short(RunRecord.of([seq_input(sequence_len=4, steps_per_epoch=10)]))
    assert "fewer than steps_per_epoch=10" in finding.message


@pytest.mark.parametrize(
    "data",
    [
        {"sequence_len": 20, "samples": 640, "batch_size": 32},  # exact
        {"sequence_len": 11, "samples": 640, "batch_size": 32},  # over half: a floor, not a bug
        {"sequence_len": 20},  # nothing to compare with
        {"sequence_len": 20, "samples": 640, "batch_size": 32, "is_sequence": False},
    ],
)
def test_healthy_lengths_are_quiet(data: dict[str, object]) -> None:
    assert sequence_too_short(RunRecord.of([seq_input(**data)])) == []


def test_huge_length_with_shuffle() -> None:
    (finding,) = sequence_len_huge(RunRecord.of([seq_input(sequence_len=sys.maxsize, steps_per_epoch=8)]))
    assert finding.code == "KER002"
    assert finding.evidence["sequence_len"] == sys.maxsize
    assert "TiB index list" in finding.message


def test_huge_by_memory_share_not_by_length() -> None:
    big = seq_input(sequence_len=10**8)  # 3.4 GiB of index list
    assert sequence_len_huge(RunRecord.of([big])) != []  # of 16 GiB: over 10%
    roomy = seq_input(sequence_len=10**8, memory_bytes=256 * GIB)
    assert sequence_len_huge(RunRecord.of([roomy])) == []


@pytest.mark.parametrize("shuffle", [False, "batch"])
def test_huge_length_without_full_shuffle_is_fine(shuffle: object) -> None:
    assert sequence_len_huge(RunRecord.of([seq_input(sequence_len=sys.maxsize, shuffle=shuffle)])) == []


def test_history_mismatch_names_the_exhausted_input() -> None:
    record = RunRecord.of(
        [
            seq_input(sequence_len=4, steps_per_epoch=10),
            Epoch(epoch=0, steps=4, t=2, pid=1),
            fit_end(epochs_run=1, steps_per_epoch=10),
        ]
    )
    (finding,) = history_epochs_mismatch(record)
    assert finding.message == (
        "fit returned after 1 of 3 epochs, and no EarlyStopping or stop_training explains it; "
        "its last epoch ran 4 of 10 steps (input ran out)"
    )
    assert finding.evidence["input_exhausted"] is True


def test_a_continued_fit_given_the_count_of_its_new_epochs_trains_none() -> None:
    """The fine-tuning guide's second fit with epochs=5, initial_epoch=5: no epoch at all."""
    record = RunRecord.of([fit_end(epochs_requested=0, initial_epoch=5, epochs_run=0)])
    (finding,) = history_epochs_mismatch(record)
    assert finding.code == "KER003"
    assert finding.severity.name == "WARNING"
    assert finding.message.startswith("fit(epochs=5, initial_epoch=5) ran no epoch")
    assert "initial_epoch +" in (finding.fix or "")
    assert history_epochs_mismatch(RunRecord.of([fit_end(epochs_requested=0, epochs_run=0)])) == []


@pytest.mark.parametrize(
    "data",
    [
        {"epochs_run": 3},
        {"epochs_run": 1, "stopped_by": "EarlyStopping"},
        {"epochs_run": 1, "stopped_by": "stop_training"},
        {"epochs_run": 1, "completed": False},  # it crashed: RUN009's business
    ],
)
def test_history_explained_or_complete_is_quiet(data: dict[str, object]) -> None:
    assert history_epochs_mismatch(RunRecord.of([seq_input(), fit_end(**data)])) == []


class DuckSequence:
    """Not a Keras class: check_sequence judges anything with __len__ the same way."""

    def __init__(self, length: int) -> None:
        self.length = length
        self.filenames = [f"img{i}.png" for i in range(1000)]
        self.batch_size = 50

    def __len__(self) -> int:
        return self.length


def test_check_sequence_reads_samples_and_batch_size_from_attributes() -> None:
    (finding,) = check_sequence(DuckSequence(2))
    assert finding.code == "KER001"
    assert finding.evidence["samples"] == 1000
    assert finding.evidence["expected_batches"] == 20
    assert check_sequence(DuckSequence(20)) == []


def test_check_sequence_overrides_and_huge() -> None:
    assert check_sequence(DuckSequence(20), n_samples=10_000) != []
    (huge,) = check_sequence(DuckSequence(sys.maxsize))
    assert huge.code == "KER002"
    assert check_sequence(DuckSequence(sys.maxsize), shuffle=False) == []


def test_check_sequence_rejects_objects_without_len() -> None:
    with pytest.raises(TypeError, match="needs an object with __len__"):
        check_sequence(object())


def test_public_api_imports_no_framework_until_used() -> None:
    import subprocess

    code = (
        "import sys, trainmedic.keras as k;"
        "print(sorted(m for m in ('keras', 'tf_keras', 'tensorflow') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_predict_inside_an_epoch_end_callback_counts_as_an_evaluation_spike() -> None:
    """The instrumentation nests a callback's model.predict in epoch_end; RUN003 must still see it."""
    from trainmedic.events import MemorySample, PhaseEnd, PhaseStart
    from trainmedic.rules.run.run003_eval_memory_spike import MIN_TRAIN_SAMPLES, eval_memory_spike

    events: list = [PhaseStart(phase="train", epoch=0, t=0, pid=1)]
    steady = range(MIN_TRAIN_SAMPLES + 2)
    events += [MemorySample(rss_bytes=400 << 20, t=0.1 * (i + 1), pid=9) for i in steady]
    events += [
        PhaseEnd(phase="train", epoch=0, t=5, pid=1),
        PhaseStart(phase="epoch_end", epoch=0, t=5.1, pid=1),
        PhaseStart(phase="predict", t=5.2, pid=1),
        MemorySample(rss_bytes=1400 << 20, t=5.3, pid=9),
        PhaseEnd(phase="predict", t=5.4, pid=1),
        PhaseEnd(phase="epoch_end", epoch=0, t=5.5, pid=1),
    ]
    (finding,) = eval_memory_spike(RunRecord.of(events))
    assert finding.evidence["phase"] == "predict"
    assert finding.message.startswith("Memory at prediction peaked at 1.4 GiB, 3.5x")
    assert "trainmedic.keras.Deferred" in finding.fix


def output(t: float = 1.0, **data: object) -> GuardObservation:
    base = {"layer": "dense_2", "layer_class": "Dense", "activation": "softmax", "units": 1}
    base.update(data)
    return GuardObservation(check=OUTPUT_OBSERVATION, data=base, t=t, pid=1)


def test_softmax_over_one_unit_is_reported_once_per_layer() -> None:
    record = RunRecord.of([output(loss="binary_crossentropy"), output(t=5.0, loss="binary_crossentropy")])
    [finding] = single_unit_softmax(record)
    assert finding.code == "KER004"
    assert "`dense_2` (Dense) applies softmax over 1 unit trained with binary_crossentropy" in finding.message
    assert finding.evidence["units"] == 1


@pytest.mark.parametrize(
    "data",
    [
        {"activation": "sigmoid", "units": 1},  # the binary head as it should be
        {"activation": "softmax", "units": 2},  # two-class softmax: fine
        {"activation": "linear", "units": 1},  # a regression head or logits
        {"activation": None, "units": 1},  # a layer without an activation attribute
    ],
)
def test_healthy_output_layers_are_not_reported(data: dict[str, object]) -> None:
    assert single_unit_softmax(RunRecord.of([output(**data)])) == []
