"""A visit's log as the seed renders it: coalesced thinking, tool calls, TODO list, errors."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from projections.payloads import LogEntry, LogType, ToolCall
from projections.wire import iso_utc, to_json

# Stream kinds whose log entry is `message = tool name, detail = full content`.
_TOOL_KINDS = frozenset({"tool_call", "tool_result", "tool_progress", "todo_update"})
_LOG_TYPES: dict[str, LogType] = {
    "thinking": "THINKING", "status": "STATUS", "step": "STEP", "tool_progress": "TOOL_PROGRESS",
    "tool_call": "TOOL_CALL", "tool_result": "TOOL_RESULT", "todo_update": "TODO_UPDATE",
    "clarify_request": "CLARIFY_REQUEST",
}


def clarify_json(clarify_id: str, question: str, choices: tuple[str, ...] | list[str]) -> str:
    """The seed's clarify payload `{"clarify_id","question","choices"}` as a JSON string."""
    return to_json({"clarify_id": clarify_id, "question": question, "choices": list(choices)})


class _Entry:
    """One log line; a THINKING line keeps its chunks until it is read, the timestamp its text once rendered."""

    __slots__ = ("type", "parts", "detail", "at", "_stamp")

    def __init__(self, type_: LogType, message: str, detail: str | None, at: datetime) -> None:
        self.type = type_
        self.parts = [message]
        self.detail = detail
        self.at = at
        self._stamp: str | None = None

    @property
    def message(self) -> str:
        """The entry's message (chunks joined)."""
        if len(self.parts) > 1:
            self.parts = ["".join(self.parts)]
        return self.parts[0]

    def render(self) -> LogEntry:
        """The seed's `{type, message, detail, timestamp}`."""
        if self._stamp is None:
            self._stamp = iso_utc(self.at)
        return LogEntry(self.type, self.message, self.detail, self._stamp)


class VisitLog:
    """Everything one visit streamed, kept in arrival order; changed only by `add_*`."""

    __slots__ = ("_entries", "_tool_calls", "_last_todo", "_rendered")

    def __init__(self) -> None:
        self._entries: list[_Entry] = []
        self._rendered: list[LogEntry] = []
        self._tool_calls: list[ToolCall] = []
        self._last_todo: str | None = None

    def add_stream(self, kind: str, content: str, tool_name: str | None, at: datetime) -> None:
        """Record one NodeStreamed chunk."""
        if kind == "thinking":
            self._add_thinking(content, at)
            return
        type_ = _LOG_TYPES[kind]
        if kind in _TOOL_KINDS:
            name = tool_name if tool_name is not None else ("todo" if kind == "todo_update" else "")
            self._entries.append(_Entry(type_, name, content, at))
        else:
            self._entries.append(_Entry(type_, content, None, at))
        if kind == "tool_call":
            self._tool_calls.append(ToolCall(tool_name, args=content))
        elif kind == "tool_result":
            self._tool_calls.append(ToolCall(tool_name, result=content))
        elif kind == "todo_update":
            self._last_todo = content

    def add_clarify(self, clarify_id: str, question: str, choices: tuple[str, ...], at: datetime) -> None:
        """Record a question the visit asked."""
        self._entries.append(_Entry("CLARIFY_REQUEST", question, clarify_json(clarify_id, question, choices), at))

    def add_error(self, error: str, at: datetime) -> None:
        """Record the error a visit failed with."""
        self._entries.append(_Entry("ERROR", error, None, at))

    def _add_thinking(self, content: str, at: datetime) -> None:
        last = self._entries[-1] if self._entries else None
        if last is not None and last.type == "THINKING":
            last.parts.append(content)
        else:
            self._entries.append(_Entry("THINKING", content, None, at))

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[LogEntry]:
        """All log entries, rendered (a new list; entries already rendered are reused)."""
        rendered, entries = self._rendered, self._entries
        if rendered:
            rendered[-1] = entries[len(rendered) - 1].render()  # thinking may have grown since
        rendered.extend(entry.render() for entry in entries[len(rendered):])
        return list(rendered)

    def thinking(self) -> str:
        """All thinking text: chunks of one run of thinking joined, runs separated by a newline."""
        return "\n".join(e.message for e in self._entries if e.type == "THINKING")

    def tool_calls(self) -> list[ToolCall]:
        """Tool calls and results in order, as §2.3 TOOL_CALLS."""
        return list(self._tool_calls)

    def todo_list(self) -> list[Any]:
        """The last TODO update as a list (a list, or an object's `todos`; else empty)."""
        if self._last_todo is None:
            return []
        try:
            parsed = msgspec.json.decode(self._last_todo)
        except msgspec.DecodeError:
            return []
        if isinstance(parsed, dict):
            parsed = parsed.get("todos")
        return parsed if isinstance(parsed, list) else []
