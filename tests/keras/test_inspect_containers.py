"""What fit's input reveals: samples kept in containers (KER001), the classes of the loss (TRN003),
the output layer (KER004)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trainmedic.keras._inspect import describe_loss, describe_output, sequence_hints


class Shards:
    """A sequence that keeps its arrays in a list under a name no rule knows."""

    def __init__(self, parts: list[np.ndarray], batch_size: int, length: int) -> None:
        self.parts = parts
        self.labels = [np.zeros(len(p)) for p in parts]
        self.batch_size = batch_size
        self.length = length

    def __len__(self) -> int:
        return self.length


def test_equal_shards_counted_by_len_add_up() -> None:
    """__len__ returns the number of shards: the shards are the data, and they add up."""
    parts = [np.zeros((512, 20), dtype=np.float32) for _ in range(8)]
    assert sequence_hints(Shards(parts, 32, length=8)) == (4096, 32)


def test_unequal_shards_add_up_whatever_len_says() -> None:
    parts = [np.zeros((512, 20)), np.zeros((512, 20)), np.zeros((100, 20))]
    assert sequence_hints(Shards(parts, 32, length=36))[0] == 1124


def test_parallel_arrays_of_one_size_count_once() -> None:
    """anchor / positive / negative of a triplet model: one sample each, not three."""
    triplets = [np.zeros((600, 16)) for _ in range(3)]
    assert sequence_hints(Shards(triplets, 32, length=math.ceil(600 / 32)))[0] == 600


def test_a_dict_of_columns_counts_its_rows() -> None:
    class Columns:
        def __init__(self) -> None:
            self.columns = {"features": np.zeros((4096, 20)), "label": np.zeros(4096)}
            self.batch_size = 32

        def __len__(self) -> int:
            return 8

    assert sequence_hints(Columns()) == (4096, 32)


def test_filenames_under_a_known_name_still_count() -> None:
    class Files:
        def __init__(self) -> None:
            self.filenames = [f"img_{i}.png" for i in range(300)]
            self.vocabulary = ["a", "b"]
            self.batch_size = 10

        def __len__(self) -> int:
            return 30

    assert sequence_hints(Files()) == (300, 10)


class Tuples:
    """`self.shards = [(x, y), ...]`: shards of (inputs, labels) pairs, as a sharded loader keeps them."""

    def __init__(self, shards: list[object], batch_size: int = 32) -> None:
        self.shards = shards
        self.batch_size = batch_size

    def __len__(self) -> int:
        return len(self.shards)


def test_shards_of_x_y_tuples_add_up() -> None:
    """Each (x, y) pair counts its rows once; the pairs are shards and add up."""
    shards = [(np.zeros((512, 20)), np.zeros(512)) for _ in range(8)]
    assert sequence_hints(Tuples(shards)) == (4096, 32)


def test_arrays_nested_in_dicts_and_tuples_are_found() -> None:
    shards = [({"image": np.zeros((300, 8, 8)), "meta": np.zeros((300, 3))}, np.zeros(300)) for _ in range(4)]
    shards.append(({"image": np.zeros((100, 8, 8)), "meta": np.zeros((100, 3))}, np.zeros(100)))
    assert sequence_hints(Tuples(shards))[0] == 1300


def test_a_single_pair_of_parallel_arrays_counts_once() -> None:
    assert sequence_hints(Tuples([(np.zeros((640, 8)), np.zeros(640))]))[0] == 640


def test_a_list_of_per_sample_pairs_counts_its_items() -> None:
    """`self.samples = [(image, label), ...]`: an image's first axis is its height, not a count."""

    class Pairs:
        def __init__(self) -> None:
            self.samples = [(np.zeros((32, 32, 3)), i % 10) for i in range(500)]
            self.batch_size = 50

        def __len__(self) -> int:
            return 10

    assert sequence_hints(Pairs()) == (500, 50)


def test_a_huge_list_is_not_walked() -> None:
    """Past the count limit the container says nothing, however long it is: reading is cheap."""

    class Counting(list):  # type: ignore[type-arg]
        visited = 0

        def __iter__(self):  # type: ignore[no-untyped-def]
            for item in super().__iter__():
                Counting.visited += 1
                yield item

    huge = Counting((np.zeros((2, 4)), np.zeros(2)) for _ in range(200_000))
    sequence_hints(Tuples(huge))
    assert Counting.visited <= 10_000


def test_arrays_deeper_than_the_depth_limit_are_not_counted() -> None:
    deep: object = np.zeros((4096, 4))
    for _ in range(10):
        deep = [deep]
    assert sequence_hints(Tuples([deep]))[0] is None


@pytest.mark.parametrize(
    ("loss", "units", "classes"),
    [
        ("sparse_categorical_crossentropy", 10, 10),
        ("categorical_crossentropy", 4, 4),
        ("binary_crossentropy", 1, 2),
        ("mse", 10, None),
    ],
)
def test_classes_from_the_compiled_loss_and_output_width(loss: str, units: int, classes: int | None) -> None:
    keras = pytest.importorskip("keras")
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(units)])
    model.compile(optimizer="adam", loss=loss)
    described = describe_loss(model)
    assert (described or {}).get("classes") == classes


def test_classes_from_a_loss_object() -> None:
    keras = pytest.importorskip("keras")
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(7)])
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    described = describe_loss(model)
    assert described is not None
    assert described["classes"] == 7
    assert described["loss"] == "sparse_categorical_crossentropy"


@pytest.mark.parametrize(
    ("last", "activation", "units"),
    [
        ("Dense(1, softmax)", "softmax", 1),
        ("Dense(1, sigmoid)", "sigmoid", 1),
        ("Dense(3, softmax)", "softmax", 3),
        ("Dense(1) + Softmax()", "softmax", 1),
        ("Dense(1) + Activation(softmax)", "softmax", 1),
    ],
)
def test_output_layer_activation_and_width(last: str, activation: str, units: int) -> None:
    keras = pytest.importorskip("keras")
    layers = {
        "Dense(1, softmax)": [keras.layers.Dense(1, activation="softmax")],
        "Dense(1, sigmoid)": [keras.layers.Dense(1, activation="sigmoid")],
        "Dense(3, softmax)": [keras.layers.Dense(3, activation="softmax")],
        "Dense(1) + Softmax()": [keras.layers.Dense(1), keras.layers.Softmax()],
        "Dense(1) + Activation(softmax)": [keras.layers.Dense(1), keras.layers.Activation("softmax")],
    }[last]
    model = keras.Sequential([keras.Input((8,)), *layers])
    model.compile(optimizer="adam", loss="binary_crossentropy")
    described = describe_output(model)
    assert described is not None
    assert (described["activation"], described["units"]) == (activation, units)
    assert described["loss"] == "binary_crossentropy"


def test_an_unbuilt_sequential_is_described_by_its_dense_head() -> None:
    keras = pytest.importorskip("keras")
    model = keras.Sequential([keras.layers.Dense(8), keras.layers.Dense(1, activation="softmax")])
    described = describe_output(model)
    assert described is not None
    assert (described["activation"], described["units"]) == ("softmax", 1)


def test_a_subclassed_models_last_softmax_layer_is_not_taken_for_its_output() -> None:
    """Layers of a subclassed model are listed in assignment order: the last may be internal."""
    keras = pytest.importorskip("keras")

    class Net(keras.Model):
        def __init__(self) -> None:
            super().__init__()
            self.score = keras.layers.Dense(1)
            self.attention = keras.layers.Softmax()  # over a wider axis, inside call

        def call(self, x):  # type: ignore[no-untyped-def]
            return self.score(x * self.attention(x))

    model = Net()
    model(np.zeros((2, 8), dtype="float32"))
    assert describe_output(model) is None
