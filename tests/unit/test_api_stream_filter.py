"""Stream filters: by event type and node, on messages and on encoded frames alike."""

from __future__ import annotations

import pytest

from api.errors import ApiError
from api.streams import StreamFilter, parse_filter, parse_flag
from engine.streams.hot import encode_frame
from projections.sse import SseMessage


def message(event: str, data: bytes, id_: int = 1) -> SseMessage:
    return SseMessage(id_, event, data)


STATUS_N2 = message("node_status", b'{"type":"node_status","nodeId":"node-2","status":"RUNNING"}')
STREAM_N3 = message("node_stream", b'{"type":"node_stream","nodeId":"node-3","content":"a\\nb"}')
RECORDED_N3 = message("visit_recorded", b'{"type":"visit_recorded","visit":{"nodeId":"node-3"}}')
PLANNER = message("planner_decision", b'{"type":"planner_decision","decision":{"nextNodeId":"node-2"}}')
DONE = message("workflow_complete", b'{"type":"workflow_complete","success":true}')
ALL = [STATUS_N2, STREAM_N3, RECORDED_N3, PLANNER, DONE]


def passing(only: StreamFilter) -> list[str]:
    by_message = [m.event for m in ALL if only.allows(m.event, m.data)]
    by_frame = [m.event for m in ALL if only.allows_frame(encode_frame(m))]
    assert by_message == by_frame
    return by_message


def test_no_filter_passes_everything():
    assert passing(StreamFilter()) == [m.event for m in ALL]
    assert not StreamFilter().active


def test_a_type_filter_passes_those_types_and_always_the_terminal_event():
    assert passing(parse_filter("node_stream", None)) == ["node_stream", "workflow_complete"]


def test_a_node_filter_passes_that_nodes_events_including_recorded_visits_and_run_level_events():
    assert passing(parse_filter(None, "node-3")) == ["node_stream", "visit_recorded", "planner_decision", "workflow_complete"]


def test_both_filters_must_agree():
    assert passing(parse_filter("node_status,visit_recorded", "node-3")) == ["visit_recorded", "workflow_complete"]


def test_blank_values_are_no_filter_and_spaces_are_trimmed():
    assert parse_filter(" ", "") == StreamFilter()
    assert parse_filter("node_stream , node_status", None).types == {"node_stream", "node_status"}


@pytest.mark.parametrize("types,nodes", [("node_started", None), ("snapshot", None),
                                         (None, ",".join(str(i) for i in range(101)))])
def test_unknown_types_and_too_many_values_are_refused(types, nodes):
    with pytest.raises(ApiError) as refused:
        parse_filter(types, nodes)
    assert refused.value.code == "VALIDATION_FAILED"


@pytest.mark.parametrize("raw,value", [(None, False), ("", False), ("true", True), ("1", True), ("TRUE", True),
                                       ("false", False), ("0", False)])
def test_flags_read_true_and_false(raw, value):
    assert parse_flag(raw, "snapshot") is value


def test_other_flag_values_are_refused():
    with pytest.raises(ApiError):
        parse_flag("maybe", "snapshot")
