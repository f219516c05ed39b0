"""An SSE client that reconnects the way a browser's EventSource does: after a cut it retries with Last-Event-ID."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from projections.sse import TERMINAL_EVENTS

RETRY_SECONDS = 0.05
"""The wait between two connection attempts while the server is away."""


@dataclass
class ResumingReader:
    """Follows one run's stream to its terminal event across server deaths, remembering every message and when it came.

    `messages` are `(id, event, data)` in arrival order; `arrived` the loop time of each;
    `connected` the loop time of each answer 200; `cuts` the loop time of each connection that
    broke before the stream ended; `refused` the status and body of an answer other than 200
    (the reader stops there).
    """

    client: httpx.AsyncClient
    path: str
    messages: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    arrived: list[float] = field(default_factory=list)
    connected: list[float] = field(default_factory=list)
    cuts: list[float] = field(default_factory=list)
    resumed_from: list[int] = field(default_factory=list)
    refused: tuple[int, str] | None = None

    @property
    def last_id(self) -> int | None:
        """The id of the last message received (None before the first)."""
        return self.messages[-1][0] if self.messages else None

    @property
    def finished(self) -> bool:
        """True once the run's terminal event arrived."""
        return bool(self.messages) and self.messages[-1][1] in TERMINAL_EVENTS

    def first_new_message_after(self, moment: float) -> float | None:
        """The loop time of the first message received on a connection opened after `moment` (None: none was).

        Bytes the server sent before `moment` and the client read after it do not count.
        """
        opened = next((at for at in self.connected if at > moment), None)
        return None if opened is None else next((at for at in self.arrived if at >= opened), None)

    async def follow(self) -> None:
        """Read, and reconnect after every cut or refused connection, until the terminal event or a non-200 answer."""
        while not self.finished and self.refused is None:
            try:
                await self._read_once()
            except httpx.TransportError:
                if self.messages:
                    self.cuts.append(asyncio.get_running_loop().time())
                await asyncio.sleep(RETRY_SECONDS)

    async def _read_once(self) -> None:
        headers = {"Accept": "text/event-stream"}
        if self.last_id is not None:
            headers["Last-Event-ID"] = str(self.last_id)
        timeout = httpx.Timeout(5.0, read=30.0)
        async with aconnect_sse(self.client, "GET", self.path, headers=headers, timeout=timeout) as source:
            if source.response.status_code != 200:
                self.refused = (source.response.status_code, (await source.response.aread()).decode()[:500])
                return
            loop = asyncio.get_running_loop()
            self.connected.append(loop.time())
            if self.last_id is not None:
                self.resumed_from.append(self.last_id)
            async for sse in source.aiter_sse():
                if not sse.data:
                    continue
                self.messages.append((int(sse.id), sse.event, json.loads(sse.data)))
                self.arrived.append(loop.time())
