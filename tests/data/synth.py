"""Synthetic tables made by the tests: clean by construction, problems planted at known rates."""

from __future__ import annotations

import numpy as np
import pandas as pd

CITIES = ["paris", "lyon", "nice", "lille", "brest"]


def clean_table(n: int, seed: int) -> pd.DataFrame:
    """Continuous features (no chance duplicates), two categoricals, a noise-free label."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({f"x{i}": rng.normal(size=n) for i in range(6)})
    frame["amount"] = rng.lognormal(3, 1, size=n).round(2) + rng.random(n)
    frame["count"] = rng.integers(0, 1_000_000, size=n)
    frame["city"] = rng.choice(CITIES, size=n)
    frame["kind"] = rng.choice(["a", "b", "c"], size=n)
    frame["y"] = ((frame["x0"] + frame["x1"] > 0) ^ (frame["kind"] == "c")).astype(int)
    return frame


def clean_splits(n: int = 3000, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    return clean_table(n, seed), clean_table(n // 4, seed + 1), clean_table(n // 4, seed + 2)
