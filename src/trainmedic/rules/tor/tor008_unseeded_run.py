"""TOR008 `unseeded-run`: the run's random generators were never seeded.

Collector: the PyTorch guard (`trainmedic.torch._hygiene`, `LoopHygiene.first_check`, at the
first checked step) reads `torch.initial_seed()`, asks `unseeded` here, and observes
`unseeded` with the `initial_seed`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainmedic.events import Event
from trainmedic.findings import FindingSpec, Severity
from trainmedic.record import Rule
from trainmedic.rules._helpers.guard import observation_rule, observed

#: The guard's observation this finding words.
OBSERVATION = "unseeded"
#: torch seeds itself with a random 64-bit value at start-up; seeds people pick are small.
RANDOM_SEED_FROM = 2**32


def _example() -> list[Event]:
    """No torch.manual_seed: the initial seed is the start-up value."""
    return observed(OBSERVATION, initial_seed=67280421310721)


SPEC = FindingSpec(
    code="TOR008",
    slug="unseeded-run",
    severity=Severity.INFO,
    title="Run is not seeded",
    what="No seed was set for the run's random generators.",
    why=(
        "Results cannot be reproduced or compared across changes. trainmedic recognises the "
        "random 64-bit seed torch picks at start-up (torch.initial_seed() >= 2**32)."
    ),
    example="A script that never calls torch.manual_seed / random.seed / np.random.seed.",
    fix="Seed Python, NumPy and torch once at start (and the DataLoader generator).",
    decided_in=("run events", "torch guard"),
    example_input=_example,
)


def unseeded(initial_seed: int) -> bool:
    """True for the random start-up seed of torch, which no one chose."""
    return initial_seed >= RANDOM_SEED_FROM


def message(evidence: Mapping[str, Any]) -> str:
    return (
        f"torch was not seeded: its initial seed is the random start-up value {evidence.get('initial_seed')}"
    )


RULES: tuple[Rule, ...] = (observation_rule(SPEC, OBSERVATION, message),)
