"""Where fine-tuning examples are in their file: the lines of a JSONL file, the rows of a
Parquet file or of a data set in memory (1-based), as the content findings of `check data`
name them."""

from __future__ import annotations

from dataclasses import dataclass

MAX_LISTED = 10  # numbers an evidence lists


@dataclass(frozen=True, slots=True)
class Located:
    """Some examples of one split: `unit` is "line" (JSONL) or "row"; `numbers` in read order
    (up to MAX_LISTED of `count`)."""

    unit: str
    numbers: list[int]
    count: int

    @property
    def key(self) -> str:
        """The evidence key: "lines" or "rows"."""
        return f"{self.unit}s"

    def words(self) -> str:
        """'line 6', 'lines 10, 11', 'lines 3, 8, ... (12 in all)'."""
        shown = ", ".join(str(n) for n in self.numbers)
        unit = self.unit if self.count == 1 else self.key
        more = f", ... ({self.count:,} in all)" if self.count > len(self.numbers) else ""
        return f"{unit} {shown}{more}"


def examples_word(count: int, noun: str = "example") -> str:
    """`noun` ("example", "pair") in the number `count` asks for."""
    return noun if count == 1 else f"{noun}s"
