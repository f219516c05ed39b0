"""Stored events carry their stable tag as topic and round-trip exactly."""

from __future__ import annotations

from domain.catalogue import CATALOGUE_EVENT_TYPES
from domain.events import RUN_EVENT_TYPES
from engine.store.mapper import MsgspecMapper
from tests.unit.builders import RunLog


def every_kind_of_event():
    log = RunLog().created(variables={"topic": "x"}).started()
    visit = log.visit("a")
    log.stream(visit, "thinking", "hmm").ask(visit, "c1", "Which?", ("x", "y")).answer("c1", "x")
    log.complete(visit, {"status": 200, "message": "ok", "data": {"r": 1}}).record(visit)
    return log.events


def test_every_run_event_round_trips_through_the_mapper():
    mapper = MsgspecMapper([*RUN_EVENT_TYPES, *CATALOGUE_EVENT_TYPES])
    for event in every_kind_of_event():
        stored = mapper.to_stored_event(event)
        assert stored.topic == type(event).__struct_config__.tag
        assert mapper.to_domain_event(stored) == event


def test_the_stored_topic_is_the_tag_not_a_python_path():
    mapper = MsgspecMapper([*RUN_EVENT_TYPES, *CATALOGUE_EVENT_TYPES])
    stored = mapper.to_stored_event(every_kind_of_event()[0])
    assert stored.topic == "RunCreated" and b'"type":"RunCreated"' in stored.state
