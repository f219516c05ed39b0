"""Old logs still decode: every stored row of the recorded fixtures decodes to its tag with today's mapper."""

from __future__ import annotations

import msgspec
import pytest

from domain.catalogue import fold_entry
from domain.workflow import PlannerSettings
from engine.store.event_store import STORED_EVENT_TYPES
from tests.fixtures.stored import LOGS, MAPPER, rows_of, stored_logs

FIXTURES = stored_logs()


def tag_of(event: msgspec.Struct) -> str:
    return tag_of_type(type(event))


def tag_of_type(event_type: type[msgspec.Struct]) -> str:
    return str(event_type.__struct_config__.tag)


@pytest.mark.parametrize("path", FIXTURES, ids=[path.stem for path in FIXTURES])
def test_every_row_of_a_recorded_log_decodes_to_the_event_its_topic_names(path):
    for row in rows_of(path):
        event = MAPPER.decode_state(bytes(row.state), row.topic, row.position)
        assert (tag_of(event), event.originator_version) == (row.topic, row.position)


@pytest.mark.parametrize("path", FIXTURES, ids=[path.stem for path in FIXTURES])
def test_a_decoded_row_encodes_back_to_the_same_fields(path):
    for row in rows_of(path):
        event = MAPPER.decode_state(bytes(row.state), row.topic, row.position)
        stored = msgspec.json.decode(bytes(row.state))
        again = msgspec.json.decode(MAPPER.encoder.encode(event))
        assert {key: again[key] for key in stored} == stored


def test_the_recorded_logs_together_hold_every_stored_event_type():
    topics = {row.topic for path in FIXTURES for row in rows_of(path)}
    assert topics == {tag_of_type(t) for t in STORED_EVENT_TYPES}


def test_the_recorded_agentic_workflow_folds_with_its_planner_settings_typed():
    rows = [row for row in rows_of(LOGS / "every-event.jsonl") if row.topic == "WorkflowPublished"]
    entries = [fold_entry([MAPPER.decode_state(bytes(row.state))]) for row in rows]
    planners = {entry.name: entry.definition.planner for entry in entries if entry is not None}
    assert planners["every-event-agentic"] == PlannerSettings(
        model_id="scripted", prompt="Ask, then finish.", script=[[{"text": "{}"}]])
    assert planners["every-event-dag"] == PlannerSettings()
