"""The inputs of the DAT examples: tables as plain columns, and the small tables they are made of.

Plain data, so the findings' files stay free of pandas; the registry's example test makes the
DataFrames and hands them to `trainmedic.data.check` (`TablesExample`) or to the input
contract (`ContractExample`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Columns = Mapping[str, Sequence[Any]]


@dataclass(frozen=True, slots=True)
class TablesExample:
    """The input of a DAT example: splits as plain columns (`train`, `val`, `test`, `serving`
    -> column -> values) and the roles `check data` is given. Plain data, so the findings'
    files stay free of pandas; the caller makes the DataFrames."""

    splits: Mapping[str, Columns]
    label: str | None = "y"
    group: str | None = None
    time: str | None = None
    id: str | None = None


@dataclass(frozen=True, slots=True)
class ContractExample:
    """The input of the DAT013 example: the table an input contract is captured from, and the
    batch served to the model at inference."""

    trained_on: Columns
    served: Columns


def rows(n: int, seed: int) -> dict[str, list[Any]]:
    """A small, healthy classification table: two numbers, a city, and a noisy label of them."""
    import random  # examples only: a clean run does not load it

    rng = random.Random(seed)
    x1 = [round(rng.gauss(0, 1), 4) for _ in range(n)]
    x2 = [round(rng.gauss(0, 1), 4) for _ in range(n)]
    city = [rng.choice(["paris", "oslo", "rome", "lima"]) for _ in range(n)]
    y = [int(a + b + rng.gauss(0, 1.5) > 0) for a, b in zip(x1, x2, strict=True)]
    return {"x1": x1, "x2": x2, "city": city, "y": y}


def head(columns: Columns, k: int) -> dict[str, list[Any]]:
    """The first `k` rows."""
    return {name: list(values[:k]) for name, values in columns.items()}


def joined(*tables: Columns) -> dict[str, list[Any]]:
    """The rows of every table, one after the other (the columns of the first)."""
    return {name: [v for t in tables for v in t[name]] for name in tables[0]}


def tables(**splits: Columns) -> TablesExample:
    """Splits with the default roles (label `y`)."""
    return TablesExample(splits)
