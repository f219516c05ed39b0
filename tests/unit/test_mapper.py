"""Every stored event type round-trips through the mapper exactly, with its stable tag as the stored topic."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from domain import events as ev
from domain.catalogue import WorkflowPublished, catalogue_stream_id, definition_digest
from domain.idempotency import claim_key
from engine.store.event_store import STORED_EVENT_TYPES
from engine.store.mapper import MsgspecMapper
from tests.unit.builders import RUN_ID, T0, RunLog

TINY = {"name": "tiny", "mode": "DAG", "nodes": [{"id": "in", "type": "userInput", "data": {}}], "edges": []}


def one_of_every_run_event() -> list[Any]:
    """Each run event type once, optional fields filled (a log, not a run the domain would allow)."""
    log = RunLog().created(variables={"topic": "x"}, uploaded_files=("in/a.csv",), idempotency_key="k-1")
    log.forked(RUN_ID, 7, "v9", "a", copied=(3, 4)).started()
    visit = log.visit("a", after="v0", predecessors=("v0",))
    log.stream(visit, "tool_call", '{"q":1}', tool_name="search").ask(visit, "c1", "Which?", ("x", "y"))
    log.answer("c1", "x").complete(visit, {"r": 1}).record(visit).decide("b", "it needs checking", from_node_id="a")
    log.model_called(visit, prompt_tokens=10, completion_tokens=4).model_called(visit, attempt=2, error_code="HTTP_429")
    log.remote_run(visit, stop="cancelled", outcome="cancelled", prompt_tokens=12, completion_tokens=3)
    log.fail(visit, "boom", output={"status": 500, "message": "boom", "data": None}).skip("c", reason="no branch")
    return log.request_cancel("enough").cancel("enough").finish({"r": 1}, files=("out.md",)).fail_run("boom").erase().events


def one_catalogue_event() -> WorkflowPublished:
    return WorkflowPublished(originator_id=catalogue_stream_id("tiny"), originator_version=1, timestamp=T0,
                             workflow_id=7, name="tiny", version=1, definition=TINY, digest=definition_digest(TINY))


def one_idempotency_event() -> Any:
    return claim_key(caller_key_id="demo", key="k-1", run_id=RUN_ID, digest="d1", workflow_name="tiny",
                     workflow_version=1, at=T0)


def one_of_each_webhook_event() -> list[Any]:
    """An attempt that got no answer and an abandonment, every field filled."""
    delivery: dict[str, Any] = {"originator_id": RUN_ID, "timestamp": T0, "webhook_id": "msg_1", "url": "https://h.example/x",
                "trigger": "run.failed", "trigger_position": 5}
    return [
        ev.WebhookAttempted(**delivery, originator_version=6, attempt=1, status_code=None, error="timeout",
                            duration_ms=10.5, delivered=False),
        ev.WebhookAbandoned(**delivery, originator_version=7, attempts=1, reason="time bound passed"),
    ]


EVENTS = [*one_of_every_run_event(), *one_of_each_webhook_event(), one_catalogue_event(), one_idempotency_event()]
MAPPER = MsgspecMapper(STORED_EVENT_TYPES)


def tag_of(event: msgspec.Struct) -> str:
    return str(type(event).__struct_config__.tag)


def test_the_round_trips_cover_every_stored_event_type():
    covered = {type(event) for event in EVENTS}
    missing = sorted(kind.__name__ for kind in set(STORED_EVENT_TYPES) - covered)
    assert covered == set(STORED_EVENT_TYPES), f"no round trip for {', '.join(missing)}: add one to EVENTS"


@pytest.mark.parametrize("event", EVENTS, ids=lambda event: type(event).__name__)
def test_a_stored_event_decodes_to_the_event_it_was(event):
    assert MAPPER.to_domain_event(MAPPER.to_stored_event(event)) == event


@pytest.mark.parametrize("event", EVENTS, ids=lambda event: type(event).__name__)
def test_the_stored_topic_is_the_events_stable_tag_not_a_python_path(event):
    stored = MAPPER.to_stored_event(event)
    assert stored.topic == tag_of(event)
    assert msgspec.json.decode(stored.state)["type"] == tag_of(event)
