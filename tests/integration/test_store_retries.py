"""An append retried after its first attempt's outcome was lost (the connection died around the commit) is stored
once: a conflict with exactly the same events at those positions is the first attempt's success, a conflict with
other events is still a conflict."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest

from domain import events as ev
from engine.store import ConcurrentAppend
from tests.support.event_log import step_chunks

AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def chunks(run_id, first: int, contents: list[str]) -> list[ev.NodeStreamed]:
    return step_chunks(run_id, first, contents, AT)


def test_a_retry_of_an_append_that_was_stored_returns_its_ids_and_stores_nothing_twice(log):
    run_id, fed = uuid4(), []
    batch = chunks(run_id, 1, ["a", "b", "c"])
    first = log.append_to_stream(batch)
    log.after_append = lambda events, ids: fed.append(ids)
    again = log.append_to_stream(batch, retried=True)
    assert again == first
    assert fed == [first]  # the read model is fed the append it may have missed
    assert log.read_stream(run_id) == batch
    assert log.last_notification_id() == first[-1]


def test_a_retry_that_finds_other_events_at_its_positions_is_a_conflict(log):
    run_id = uuid4()
    log.append_to_stream(chunks(run_id, 1, ["a", "b"]))
    with pytest.raises(ConcurrentAppend):
        log.append_to_stream(chunks(run_id, 1, ["a", "other"]), retried=True)
    assert [e.content for e in log.read_stream(run_id)] == ["a", "b"]


def test_a_first_attempt_that_meets_a_taken_position_is_a_conflict_even_with_the_same_events(log):
    run_id = uuid4()
    batch = chunks(run_id, 1, ["a"])
    log.append_to_stream(batch)
    with pytest.raises(ConcurrentAppend):
        log.append_to_stream(batch)
