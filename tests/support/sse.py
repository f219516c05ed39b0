"""A real SSE client: reads a run's stream over HTTP, optionally stopping early."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import aconnect_sse


@dataclass
class Received:
    """What one connection delivered."""

    ids: list[int] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    data: list[dict[str, Any]] = field(default_factory=list)
    ended: bool = False


async def read_stream(
    client: httpx.AsyncClient, path: str, *, last_event_id: int | None = None, stop_after: int | None = None,
) -> Received:
    """Read messages until the server ends the stream or `stop_after` messages arrived."""
    headers = {"Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    got = Received()
    timeout = httpx.Timeout(30.0, read=60.0)
    async with aconnect_sse(client, "GET", path, headers=headers, timeout=timeout) as source:
        source.response.raise_for_status()
        async for sse in source.aiter_sse():
            if not sse.data:
                continue
            got.ids.append(int(sse.id))
            got.events.append(sse.event)
            got.data.append(json.loads(sse.data))
            if stop_after is not None and len(got.ids) >= stop_after:
                return got
        got.ended = True
    return got
