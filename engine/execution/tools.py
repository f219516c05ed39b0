"""Built-in tools an agent node may list in `data.tools`: deterministic and local, for the demos and tests."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import UUID

import msgspec

from engine.llm import ToolSpec
from engine.workspace.directory import UnsafePath, Workspace

MAX_FILE_CHARS = 1_000_000


class ToolHost(Protocol):
    """What a tool may touch: the run's workspace and the visit's stream."""

    run_id: UUID
    workspace: Workspace

    async def stream(self, kind: str, content: str, tool_name: str | None = None) -> None:
        """Append one chunk to the visit's stream."""


class ToolError(Exception):
    """A tool refused its arguments; the message goes back to the model as the tool's result."""


Run = Callable[[ToolHost, dict[str, Any]], Awaitable[str]]


@dataclass(frozen=True)
class Tool:
    """A tool: what the model sees, what runs, and whether running it twice is harmless."""

    spec: ToolSpec
    run: Run
    idempotent: bool = True


def _text(args: dict[str, Any], name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"argument {name!r} must be a non-empty string")
    return value


async def web_search(host: ToolHost, args: dict[str, Any]) -> str:
    """Three canned results derived from the query (stable across runs; no network)."""
    query = _text(args, "query")
    digest = hashlib.sha256(query.encode()).hexdigest()
    slug = "-".join(query.lower().split())[:40]
    results = [
        {
            "title": f"{query} — {topic}",
            "url": f"https://example.org/{slug}/{digest[i * 6:i * 6 + 6]}",
            "snippet": f"A {topic} of {query}, with figures and references ({digest[i * 4:i * 4 + 4]}).",
        }
        for i, topic in enumerate(("overview", "recent study", "practical guide"))
    ]
    return msgspec.json.encode({"query": query, "results": results}).decode()


async def write_file(host: ToolHost, args: dict[str, Any]) -> str:
    """Write a text file into the run's workspace (relative paths only)."""
    path = _text(args, "path")
    content = args.get("content")
    if not isinstance(content, str):
        raise ToolError("argument 'content' must be a string")
    if len(content) > MAX_FILE_CHARS:
        raise ToolError(f"content is {len(content)} characters; at most {MAX_FILE_CHARS} are allowed")
    data = content.encode("utf-8")
    try:
        written = await asyncio.to_thread(host.workspace.write, host.run_id, path, data)
    except UnsafePath as error:
        raise ToolError(str(error)) from None
    return f"wrote {len(data)} bytes to {written}"


async def todo_write(host: ToolHost, args: dict[str, Any]) -> str:
    """Replace the visit's TODO list (shown as a `todo_update` chunk)."""
    todos = args.get("todos")
    if not isinstance(todos, list) or not all(isinstance(item, dict) for item in todos):
        raise ToolError("argument 'todos' must be a list of objects like {\"content\": ..., \"status\": ...}")
    await host.stream("todo_update", msgspec.json.encode(todos).decode(), "todo")
    return f"todo list updated ({len(todos)} items)"


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


BUILTIN_TOOLS: dict[str, Tool] = {
    "web_search": Tool(
        ToolSpec("web_search", "Search the web (demo: canned, deterministic results).",
                 _schema({"query": {"type": "string", "description": "What to search for"}}, ["query"])),
        web_search,
    ),
    "write_file": Tool(
        ToolSpec("write_file", "Write a text file into the run's workspace.",
                 _schema({"path": {"type": "string", "description": "Relative path, e.g. notes/a.md"},
                          "content": {"type": "string"}}, ["path", "content"])),
        write_file,
    ),
    "todo_write": Tool(
        ToolSpec("todo_write", "Replace your TODO list.",
                 _schema({"todos": {"type": "array", "items": {"type": "object"}}}, ["todos"])),
        todo_write,
    ),
}

ASK_USER = ToolSpec(
    "ask_user",
    "Ask the user a question and wait for the answer (the run pauses).",
    _schema({"question": {"type": "string"}, "choices": {"type": "array", "items": {"type": "string"}}}, ["question"]),
)


def unknown_tools(names: list[str]) -> list[str]:
    """The names in a node's `tools` list that no built-in tool answers to."""
    return [name for name in names if name not in BUILTIN_TOOLS]


READ_ONLY_TOOLS = frozenset({"get_predecessor_paths", "get_node_output", "get_node_meta"})
"""The context tools (seed internal-context-query-spec §1): they only read the run's log."""


def is_idempotent(name: str) -> bool:
    """True when calling the tool again repeats no side effect: a built-in that says so, or a context tool.

    Any other name (a remote gateway's `terminal`, file writes, ...) is taken to have side effects.
    """
    tool = BUILTIN_TOOLS.get(name)
    return tool.idempotent if tool is not None else name in READ_ONLY_TOOLS
