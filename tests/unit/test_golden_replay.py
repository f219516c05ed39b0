"""Golden replay: the stored logs of the demo runs (and of a few edge cases) still send the same bytes."""

from __future__ import annotations

import pytest

from tests.fixtures.golden import (
    DEMOS,
    EDGES,
    LOGS,
    frame_sections,
    live_replay,
    memory_replay,
    read_sections,
    read_views,
    store_replay,
    stored_events,
    view_sections,
)

LOG_NAMES = (*DEMOS, *EDGES)


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
    expected = read_sections(LOGS / f"{name}.frames.sse")
    actual = dict(frame_sections(stored_events(name)))
    assert list(actual) == list(expected)
    for label, frames in expected.items():
        assert actual[label] == frames, label


@pytest.mark.parametrize("name", LOG_NAMES)
def test_run_views_node_logs_and_context_answers_send_the_recorded_bytes(name):
    expected = read_views(LOGS / f"{name}.views.jsonl")
    actual = dict(view_sections(stored_events(name)))
    assert list(actual) == list(expected)
    for label, body in expected.items():
        assert actual[label] == body, label
