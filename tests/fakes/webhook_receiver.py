"""A webhook receiver on loopback: real HTTP through uvicorn, each POST answered by its script and recorded.

A test scripts what the next requests get (a status, after a delay, with a Location), starts it late to play a
receiver that is down, and stops and starts it again on the same port.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn

from tests.support.server import free_port


@dataclass(frozen=True)
class Reply:
    """What one request gets: a status, after `delay` seconds, with a `Location` header for a redirect."""

    status: int = 200
    delay: float = 0.0
    location: str | None = None


@dataclass(frozen=True)
class Received:
    """One request as it arrived."""

    path: str
    headers: dict[str, str]
    body: bytes
    at: float
    client_port: int = 0
    """The sender's source port (a test finds which process sent it)."""


@dataclass
class WebhookReceiver:
    """Answers POSTs by `script` (then 200), records every request in `received`."""

    port: int = field(default_factory=free_port)
    script: list[Reply] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)
    _server: uvicorn.Server | None = None
    _task: asyncio.Task[None] | None = None

    def url(self, path: str = "/hook") -> str:
        """The receiver's URL for a path."""
        return f"http://127.0.0.1:{self.port}{path}"

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] != "http":
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}
        client_port = scope["client"][1] if scope.get("client") else 0
        self.received.append(Received(scope["path"], headers, body, time.monotonic(), client_port))
        reply = self.script.pop(0) if self.script else Reply()
        if reply.delay:
            await asyncio.sleep(reply.delay)
        extra = [(b"location", reply.location.encode())] if reply.location else []
        await send({"type": "http.response.start", "status": reply.status,
                    "headers": [(b"content-type", b"text/plain"), *extra]})
        await send({"type": "http.response.body", "body": b"ok"})

    async def start(self) -> WebhookReceiver:
        """Listen on the port (again, after `stop`)."""
        config = uvicorn.Config(self, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off",
                                timeout_graceful_shutdown=1)
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve())
        while not self._server.started:
            if self._task.done():
                self._task.result()
            await asyncio.sleep(0.01)
        return self

    async def stop(self) -> None:
        """Stop listening (connections are then refused)."""
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
        self._server, self._task = None, None

    def to(self, path: str) -> list[Received]:
        """The requests that came for one path."""
        return [request for request in self.received if request.path == path]
