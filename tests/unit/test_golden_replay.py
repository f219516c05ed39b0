"""Golden replay: the stored logs of the demo runs (and of a few edge cases) still send the same bytes."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from projections.payloads import (
    NodeStatusEndedPayload,
    NodeStatusRunningPayload,
    NodeStreamPayload,
    PlannerDecisionPayload,
    SnapshotPayload,
    VisitRecordedPayload,
    VisitRefRecordedPayload,
    WorkflowCompletePayload,
    WorkflowErrorPayload,
)
from projections.wire import encode
from tests.fixtures.golden import (
    DEMOS,
    EDGES,
    frame_sections,
    live_replay,
    memory_replay,
    read_sections,
    read_views,
    store_replay,
    view_sections,
)
from tests.fixtures.stored import LOGS, stored_events

LOG_NAMES = (*DEMOS, *EDGES)
PAYLOADS = {
    "node_stream": NodeStreamPayload, "planner_decision": PlannerDecisionPayload, "snapshot": SnapshotPayload,
    "workflow_complete": WorkflowCompletePayload, "workflow_error": WorkflowErrorPayload,
}


@pytest.mark.parametrize("name", LOG_NAMES)
def test_a_full_replay_from_the_store_sends_the_recorded_bytes(name):
    assert store_replay(stored_events(name)) == (LOGS / f"{name}.sse").read_bytes()


@pytest.mark.parametrize("name", LOG_NAMES)
def test_a_replay_from_memory_sends_the_recorded_bytes(name):
    assert memory_replay(stored_events(name)) == (LOGS / f"{name}.sse").read_bytes()


@pytest.mark.parametrize("name", LOG_NAMES)
def test_a_live_client_receives_the_recorded_bytes(name):
    assert live_replay(stored_events(name)) == (LOGS / f"{name}.sse").read_bytes()


@pytest.mark.parametrize("name", LOG_NAMES)
def test_snapshots_and_filtered_replays_send_the_recorded_bytes(name):
    assert_same_sections(read_sections(LOGS / f"{name}.frames.sse"), dict(frame_sections(stored_events(name))))


@pytest.mark.parametrize("name", LOG_NAMES)
def test_run_views_node_logs_and_context_answers_send_the_recorded_bytes(name):
    assert_same_sections(read_views(LOGS / f"{name}.views.jsonl"), dict(view_sections(stored_events(name))))


def assert_same_sections(expected: dict[str, bytes], actual: dict[str, bytes]) -> None:
    """The same labelled sections, in the same order, byte for byte (the failing label is named)."""
    assert list(actual) == list(expected)
    for label, recorded in expected.items():
        assert actual[label] == recorded, label


def payload_type(event: str, data: bytes) -> type[Any]:
    """The payload Struct documented for a message."""
    if event == "node_status":
        return NodeStatusRunningPayload if b'"status":"RUNNING"' in data else NodeStatusEndedPayload
    if event == "visit_recorded":
        return VisitRecordedPayload if b'"logsJson"' in data else VisitRefRecordedPayload
    return PAYLOADS[event]


def messages_in(frames: bytes) -> list[tuple[str, bytes]]:
    """(event, data) of every message in a run of SSE frames."""
    messages = []
    for frame in frames.split(b"\r\n\r\n"):
        fields = dict(line.split(b": ", 1) for line in frame.split(b"\r\n") if line and not line.startswith(b":"))
        if b"data" in fields:
            messages.append((fields[b"event"].decode(), fields[b"data"]))
    return messages


@pytest.mark.parametrize("name", LOG_NAMES)
def test_every_message_is_exactly_its_documented_payload(name):
    frames = (LOGS / f"{name}.sse").read_bytes() + (LOGS / f"{name}.frames.sse").read_bytes()
    messages = messages_in(frames)
    assert {event for event, _ in messages} >= {"node_status", "visit_recorded", "snapshot"}
    for event, data in messages:
        payload = msgspec.json.decode(data, type=payload_type(event, data))
        assert payload.type == event and encode(payload) == data
