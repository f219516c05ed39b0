"""A visit's log reads the same however often it is read while it grows."""

from __future__ import annotations

from datetime import UTC, datetime

from projections.logs import VisitLog

AT = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def test_reading_a_log_between_additions_shows_grown_thinking_and_new_entries():
    log = VisitLog()
    log.add_stream("thinking", "Let me ", None, AT)
    first = log.entries()
    log.add_stream("thinking", "think.", None, AT)
    log.add_stream("tool_call", '{"q":1}', "search", AT)
    again = log.entries()
    assert [e.message for e in first] == ["Let me "]
    assert [(e.type, e.message, e.detail) for e in again] == [
        ("THINKING", "Let me think.", None), ("TOOL_CALL", "search", '{"q":1}'),
    ]
    fresh = VisitLog()
    fresh.add_stream("thinking", "Let me think.", None, AT)
    fresh.add_stream("tool_call", '{"q":1}', "search", AT)
    assert again == fresh.entries()
