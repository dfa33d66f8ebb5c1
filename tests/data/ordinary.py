"""Ordinary tables, synthetic, in the shapes of public ones (nothing is downloaded): a label
that is a count or a score, and a clock time held as text. Nothing in them is wrong, so
`check data` must make no claim about them: no class imbalance for the count or the score
(a regression target), no schema mismatch for the times a random split leaves unseen.

Shared by `tests/data/test_label_readings.py`, `tests/data/test_checks.py` and
`benchmarks/data_real_tables.py`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def seizures_like(seed: int = 0) -> pd.DataFrame:
    """Synthetic, in the shape of Thall & Vail's epilepsy trial (MASS `epil`: 59 patients, 4
    two-week periods, 236 rows): treatment, age, the 8-week baseline count, the period, and
    `y`, the number of seizures in the period (negative binomial: 0 to ~100, tens of values)."""
    rng = np.random.default_rng(seed)
    patients = 59
    treated = np.repeat(rng.random(patients) < 0.5, 4)
    age = np.repeat(rng.integers(18, 43, patients), 4)
    base = np.repeat(rng.negative_binomial(2, 2 / 33, patients) + 6, 4)
    period = np.tile([1, 2, 3, 4], patients)
    mean = base / 4 * np.exp(-0.3 * treated - 0.05 * (period - 2.5))
    y = rng.negative_binomial(1.5, 1.5 / (1.5 + mean))
    return pd.DataFrame(
        {"trt": np.where(treated, "progabide", "placebo"), "age": age, "base": base, "period": period, "y": y}
    )


def vocabulary_like(rows: int = 3000, seed: int = 0) -> pd.DataFrame:
    """Synthetic, in the shape of the GSS vocabulary table (carData `Vocab`: year, sex, years
    of education, and `vocabulary`, words right out of 10): a beta-binomial score whose mean
    rises with education, 0 to 10."""
    rng = np.random.default_rng(seed)
    education = np.clip(np.round(rng.normal(13, 3, rows)), 0, 20).astype(int)
    mean = 1 / (1 + np.exp(-(0.15 * (education - 13) + 0.5)))
    vocabulary = rng.binomial(10, rng.beta(12 * mean, 12 * (1 - mean)))
    return pd.DataFrame(
        {
            "year": rng.choice(np.arange(1974, 2017, 2), rows),
            "sex": rng.choice(["Female", "Male"], rows),
            "education": education,
            "vocabulary": vocabulary,
        }
    )


def flights_like(rows: int = 1500, seed: int = 0) -> pd.DataFrame:
    """Synthetic flights: the departure as clock-time text ('08:35'; most on a five-minute
    mark, the rest any minute from 05:00 to 23:00), carrier, distance, and whether it left late."""
    rng = np.random.default_rng(seed)
    on_mark = rng.random(rows) < 0.75
    minutes = np.where(on_mark, rng.choice(np.arange(300, 1380, 5), rows), rng.integers(300, 1380, rows))
    late = rng.random(rows) < 1 / (1 + np.exp(-((minutes - 840) / 300 - 1)))
    return pd.DataFrame(
        {
            "dep_time": [f"{m // 60:02d}:{m % 60:02d}" for m in minutes],
            "carrier": rng.choice(["AA", "DL", "UA", "B6", "WN"], rows),
            "distance": np.round(rng.lognormal(6.5, 0.6, rows)),
            "late": late.astype(int),
        }
    )
