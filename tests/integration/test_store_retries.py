"""An append retried after its first attempt's outcome was lost (the connection died around the commit) is stored
once: a conflict with exactly the same events at those positions is the first attempt's success, a conflict with
other events is still a conflict."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest

from domain import events as ev
from engine.store import ConcurrentAppend, EventStore, parse_database_url

AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def event_log(store):
    opened = EventStore(parse_database_url(store))
    yield opened
    opened.close()


def chunks(run_id, first: int, contents: list[str]) -> list[ev.NodeStreamed]:
    return [
        ev.NodeStreamed(
            originator_id=run_id, originator_version=first + i, timestamp=AT,
            visit_uuid="v1", node_id="draft", kind="step", content=content,
        )
        for i, content in enumerate(contents)
    ]


def test_a_retry_of_an_append_that_was_stored_returns_its_ids_and_stores_nothing_twice(event_log):
    run_id, fed = uuid4(), []
    batch = chunks(run_id, 1, ["a", "b", "c"])
    first = event_log.append_to_stream(batch)
    event_log.after_append = lambda events, ids: fed.append(ids)
    again = event_log.append_to_stream(batch, retried=True)
    assert again == first
    assert fed == [first]  # the read model is fed the append it may have missed
    assert event_log.read_stream(run_id) == batch
    assert event_log.last_notification_id() == first[-1]


def test_a_retry_that_finds_other_events_at_its_positions_is_a_conflict(event_log):
    run_id = uuid4()
    event_log.append_to_stream(chunks(run_id, 1, ["a", "b"]))
    with pytest.raises(ConcurrentAppend):
        event_log.append_to_stream(chunks(run_id, 1, ["a", "other"]), retried=True)
    assert [e.content for e in event_log.read_stream(run_id)] == ["a", "b"]


def test_a_first_attempt_that_meets_a_taken_position_is_a_conflict_even_with_the_same_events(event_log):
    run_id = uuid4()
    batch = chunks(run_id, 1, ["a"])
    event_log.append_to_stream(batch)
    with pytest.raises(ConcurrentAppend):
        event_log.append_to_stream(batch)
