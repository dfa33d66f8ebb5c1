"""A worker whose launcher gives its rank only once training began (Ray Train keeps it in the
worker's train context, not in RANK): the integration's rank reader tags its events."""

from __future__ import annotations

import pytest

from trainmedic.instrument import channel


@pytest.fixture
def no_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(channel, "RANK", None)
    monkeypatch.setattr(channel, "_rank_readers", [])


@pytest.mark.usefixtures("no_rank")
def test_the_first_rank_a_reader_knows_is_kept() -> None:
    answers = iter([None, 3, 5])  # not in a worker yet, then rank 3 (later answers are not asked)
    channel.add_rank_reader(lambda: next(answers))
    assert channel.current_rank() is None
    assert channel.current_rank() == 3
    assert channel.current_rank() == 3
    assert channel.RANK == 3  # what the guard's checks read


@pytest.mark.usefixtures("no_rank")
def test_a_reader_that_fails_leaves_the_rank_unknown() -> None:
    def outside_a_worker() -> int:
        raise RuntimeError("`get_context` cannot be used outside of a Ray Train training function.")

    channel.add_rank_reader(outside_a_worker)
    assert channel.current_rank() is None


def test_the_environments_rank_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(channel, "RANK", 2)
    monkeypatch.setattr(channel, "_rank_readers", [lambda: 7])
    assert channel.current_rank() == 2
