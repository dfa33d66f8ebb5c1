"""A keras.utils.PyDataset that serves batches from shards held in a list (one array per file).

Healthy as written: __len__ counts the batches of all shards. `--bug len-shards`
returns the number of shards instead, so every epoch sees 8 of 128 batches
(KER001 sequence-too-short: the samples are found inside the list of shards).
`--layout dict` keeps the features and labels in a dict of arrays instead.

Synthetic data: 8 shards of 512 rows, 20 features, a linear binary target.
"""

import argparse
import math

import numpy as np

import keras

parser = argparse.ArgumentParser()
parser.add_argument("--bug", choices=["len-shards"], default=None)
parser.add_argument("--layout", choices=["shards", "dict"], default="shards")
args = parser.parse_args()

rng = np.random.default_rng(0)
w = rng.normal(size=20)
shards = []
for _ in range(8):  # as if read from part-00000.npz ... part-00007.npz
    x = rng.normal(size=(512, 20)).astype("float32")
    shards.append((x, (x @ w > 0).astype("float32")))


class ShardedBatches(keras.utils.PyDataset):
    def __init__(self, shards, batch_size, len_is_shards=False, **kwargs):
        super().__init__(**kwargs)
        self.parts = [x for x, _ in shards]
        self.targets = [y for _, y in shards]
        self.batch_size = batch_size
        self.len_is_shards = len_is_shards
        self.offsets = np.cumsum([0] + [len(p) for p in self.parts])

    def __len__(self):
        if self.len_is_shards:
            return len(self.parts)
        return math.ceil(self.offsets[-1] / self.batch_size)

    def __getitem__(self, idx):
        start = idx * self.batch_size
        rows = np.arange(start, min(start + self.batch_size, self.offsets[-1]))
        shard = np.searchsorted(self.offsets, rows, side="right") - 1
        within = rows - self.offsets[shard]
        x = np.stack([self.parts[s][i] for s, i in zip(shard, within, strict=False)])
        y = np.stack([self.targets[s][i] for s, i in zip(shard, within, strict=False)])
        return x, y


class ColumnBatches(keras.utils.PyDataset):
    """The same data as named columns: {'features': ..., 'label': ...}."""

    def __init__(self, shards, batch_size, len_is_shards=False, **kwargs):
        super().__init__(**kwargs)
        self.columns = {
            "features": np.concatenate([x for x, _ in shards]),
            "label": np.concatenate([y for _, y in shards]),
        }
        self.batch_size = batch_size
        self.n_shards = len(shards) if len_is_shards else None

    def __len__(self):
        return self.n_shards or math.ceil(len(self.columns["label"]) / self.batch_size)

    def __getitem__(self, idx):
        part = slice(idx * self.batch_size, (idx + 1) * self.batch_size)
        return self.columns["features"][part], self.columns["label"][part]


batches_cls = ShardedBatches if args.layout == "shards" else ColumnBatches
train = batches_cls(shards, batch_size=32, len_is_shards=args.bug == "len-shards")
model = keras.Sequential(
    [
        keras.Input((20,)),
        keras.layers.Dense(16, activation="relu"),
        keras.layers.Dense(1, activation="sigmoid"),
    ]
)
model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
model.fit(train, epochs=3, verbose=2)
