"""Gateway run events as our stream chunks: each event is copied into the visit's log as it arrives.

`message.delta` -> `tool_progress` named `hermes_remote:final` (the answer's text, in order),
`reasoning.available` -> `thinking`, `tool.started` / `tool.completed` -> `tool_call` /
`tool_result`, anything else -> `tool_progress` naming the event. Terminal events end the run.
"""

from __future__ import annotations

from typing import Any

import msgspec

FINAL_TEXT = "hermes_remote:final"
"""The merge id of the answer's text deltas (the seed's name)."""
TERMINAL_EVENTS = frozenset({"run.completed", "run.failed", "run.cancelled"})


class Chunk(msgspec.Struct, frozen=True):
    """One stream chunk for the visit: its kind, content and tool name."""

    kind: str
    content: str
    tool_name: str | None = None


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def progress(event_type: str, name: str, preview: str) -> Chunk:
    """A `tool_progress` chunk in the shape the other model nodes use."""
    return Chunk("tool_progress", _json({"event_type": event_type, "name": name, "preview": preview}), name)


def chunk_for(event: dict[str, Any]) -> Chunk | None:
    """The chunk that copies one non-terminal gateway event into our log (None for a terminal one)."""
    kind = str(event.get("event", ""))
    if kind in TERMINAL_EVENTS:
        return None
    if kind == "message.delta":
        return progress(kind, FINAL_TEXT, str(event.get("delta", "")))
    if kind == "reasoning.available":
        return Chunk("thinking", str(event.get("text", "")))
    if kind == "tool.started":
        tool = str(event.get("tool") or "tool")
        return Chunk("tool_call", _json({"preview": event.get("preview")}), tool)
    if kind == "tool.completed":
        tool = str(event.get("tool") or "tool")
        return Chunk("tool_result", _json({"duration": event.get("duration"), "error": bool(event.get("error"))}), tool)
    if kind == "approval.request":
        shown = {name: event.get(name) for name in ("command", "description", "choices")}
        return progress(kind, "hermes_remote:approval", _json(shown))
    detail = {name: value for name, value in event.items() if name not in ("event", "run_id", "timestamp")}
    return progress(kind or "event", "hermes_remote:event", _json(detail))
