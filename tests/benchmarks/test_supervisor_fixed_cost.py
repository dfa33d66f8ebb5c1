"""The supervisor's fixed cost per run stays within its target (benchmarks/supervise_fixed_cost.py).

What a run costs before the trainer does anything (interpreter, imports, run folder,
manifest, diagnosis, report) is paid by every supervised run; this keeps it measured,
not guessed from which modules get imported. A few interleaved rounds; the cheapest
round is asserted, since another process's load only ever adds CPU time to a round.
"""

from __future__ import annotations

from benchmarks.supervise_fixed_cost import TARGET_S, fixed_cost


def test_a_trivial_run_costs_at_most_the_target_in_supervisor_cpu() -> None:
    median, rounds = fixed_cost(rounds=5)
    cheapest = min(r.fixed_s for r in rounds)
    assert cheapest <= TARGET_S, f"fixed cost {cheapest:.3f} s CPU (median {median:.3f} s) > {TARGET_S} s"
    assert all(r.bare_s > 0 for r in rounds)  # the bare child was measured, not skipped
