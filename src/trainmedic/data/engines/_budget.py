"""How a memory budget is shared between DuckDB and the Python side of the check.

The budget (`--memory-budget`) is split in proportion, not by a fixed reserve, so that the
check fits any budget from `FLOOR` up: DuckDB's `memory_limit` is `DUCKDB_SHARE` of it and
the Python side (the interpreter and its libraries, the seeded samples, the models and
test statistics fitted on them) keeps the rest. What DuckDB cannot hold it spills to its
temporary folder; what Python cannot hold it does not read: the samples shrink with the
budget (`Shares.sample_rows`), from 200,000 rows a split down to `MIN_SAMPLE_ROWS`.

DuckDB runs one thread per `THREAD_MEMORY` of its limit (at most one per core): each thread
holds its own buffers (a Parquet column chunk being decoded, an aggregate's partitions), and
a thread without room for them fails instead of spilling. Parquet row groups are read
column by column (no prefetch of a whole row group) when a row group per thread does not fit
a quarter of the limit: a pyarrow file of 1,000,000 rows x 20 columns is one row group of
126 MiB, which a prefetching scan allocates at once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

FLOOR = 512 * 2**20  # below it the libraries alone take half the budget
DUCKDB_SHARE = 0.35
# Resident size of the Python side with the smallest samples: the interpreter with pandas,
# pyarrow, scikit-learn and duckdb imported (235 MiB on Linux x86-64, Python 3.11) and what
# their first use keeps (about 300 MiB after the sampled checks have run).
LIBRARIES = 300 * 2**20
THREAD_MEMORY = 128 * 2**20
MAX_SAMPLE_ROWS = 200_000
MIN_SAMPLE_ROWS = 10_000
# Bytes a sampled cell costs the Python side at its peak: the Arrow table and the frame it
# becomes, the per-row hashes, the feature matrices and the models fitted on them.
CELL_BYTES = 64


@dataclass(frozen=True, slots=True)
class Shares:
    """`budget` split: DuckDB's `memory_limit` and `threads`, and the bytes left to Python."""

    budget: int
    duckdb: int
    python: int
    threads: int

    def sample_rows(self, columns: int, splits: int) -> int:
        """The most rows a seeded sample of one split may hold, with `splits` samples of
        `columns` columns held together within the Python share."""
        room = max(self.python - LIBRARIES, 0)
        rows = room // (CELL_BYTES * max(columns, 1) * max(splits, 1)) // 1000 * 1000
        return int(min(max(rows, MIN_SAMPLE_ROWS), MAX_SAMPLE_ROWS))

    def prefetch_row_groups(self, largest_row_group: int) -> bool:
        """Whether DuckDB may read a whole Parquet row group at once on every thread."""
        return self.threads * largest_row_group <= self.duckdb // 4


def shares(budget: int, cpus: int | None = None) -> Shares:
    """The split of `budget` bytes (at least `FLOOR`; see the module docstring)."""
    duckdb = int(budget * DUCKDB_SHARE)
    cores = cpus if cpus is not None else _cores()
    threads = max(1, min(cores, duckdb // THREAD_MEMORY))
    return Shares(budget=budget, duckdb=duckdb, python=budget - duckdb, threads=threads)


def _cores() -> int:
    """The cores this process may run on (its affinity, where the system has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(len(os.sched_getaffinity(0)), 1)
    return os.cpu_count() or 1
