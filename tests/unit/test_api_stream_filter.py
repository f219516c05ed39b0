"""Stream filters: by event type and node, read from what each message carries, never from its JSON."""

from __future__ import annotations

import pytest

from api.errors import ApiError
from api.sse import encode_frame
from api.streams import StreamFilter, parse_filter, parse_flag
from engine.runs.hot import HotRun
from projections.sse import SseMessage
from tests.unit.builders import RUN_ID, RunLog


def message(event: str, node_id: str | None, id_: int = 1) -> SseMessage:
    return SseMessage(id_, event, b"{}", node_id)


STATUS_N2 = message("node_status", "node-2")
STREAM_N3 = message("node_stream", "node-3")
RECORDED_N3 = message("visit_recorded", "node-3")
PLANNER = message("planner_decision", None)
DONE = message("workflow_complete", None)
ALL = [STATUS_N2, STREAM_N3, RECORDED_N3, PLANNER, DONE]


def passing(only: StreamFilter) -> list[str]:
    return [m.event for m in ALL if only.allows(m.event, m.node_id)]


def test_no_filter_passes_everything():
    assert passing(StreamFilter()) == [m.event for m in ALL]
    assert not StreamFilter().active and StreamFilter().wants is None


def test_a_type_filter_passes_those_types_and_always_the_terminal_event():
    assert passing(parse_filter("node_stream", None)) == ["node_stream", "workflow_complete"]


def test_a_node_filter_passes_that_nodes_events_including_recorded_visits_and_run_level_events():
    assert passing(parse_filter(None, "node-3")) == ["node_stream", "visit_recorded", "planner_decision", "workflow_complete"]


def test_both_filters_must_agree():
    assert passing(parse_filter("node_status,visit_recorded", "node-3")) == ["visit_recorded", "workflow_complete"]


def test_a_hot_run_hands_out_only_the_frames_a_filter_wants_and_the_position_it_reached():
    run = RunLog().created().started()
    a, b = run.visit("A"), run.visit("B")
    run.stream(a, "status", "a").stream(b, "status", "b").complete(a).record(a).decide("B", "why").finish()
    hot = HotRun(RUN_ID, max_frames=100, encode_frame=encode_frame)
    hot.offer(run.events)
    frames, last = hot.frames_after(0, wants=parse_filter(None, "B").wants)
    assert [f.split(b"\r\n")[1] for f in frames] == [
        b"event: node_status", b"event: node_stream", b"event: planner_decision", b"event: workflow_complete",
    ]
    assert all(b'"nodeId":"A"' not in f for f in frames) and last == run.events[-1].originator_version
    assert hot.frames_after(0, wants=parse_filter("node_stream", "A").wants)[0][0].startswith(b"id: 5\r\n")


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
