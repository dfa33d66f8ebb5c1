"""How many identical rows chance alone gives: the yardstick of DAT001, DAT006 and DAT007.

In a table of a few categorical columns different people share every attribute, so only
identical rows *beyond* what the feature space explains point at copies. The data checks
measure (`trainmedic.data._chance`: the expected count from the observed frequencies, and
the Poisson tail of the observed one); this decides and words the comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

CHANCE_P_VALUE = 1e-3  # identical rows beyond what chance gives: Poisson tail below this


@dataclass(frozen=True, slots=True)
class Chance:
    """Identical rows observed against those chance predicts, and whether the excess is real."""

    observed: int
    expected: float
    combinations: float  # effective size of the feature space (1 / collision probability)
    p_value: float  # P(Poisson(expected) >= observed): how surprising the observed count is

    @property
    def expected_text(self) -> str:
        return f"{self.expected:,.0f}" if self.expected >= 10 else f"{self.expected:.2g}"

    @property
    def beyond_chance(self) -> bool:
        return self.observed > 0 and self.p_value < CHANCE_P_VALUE

    @property
    def excess(self) -> int:
        return max(0, round(self.observed - self.expected))

    def evidence(self) -> dict[str, object]:
        return {
            "expected_by_chance": round(self.expected, 2),
            "feature_space_combinations": _significant(self.combinations),
            "p_value": float(f"{self.p_value:.3g}"),
        }


def _significant(value: float) -> float | str:
    if not math.isfinite(value) or value > 1e12:
        return "more than 1e12"
    return float(f"{value:.3g}")
