"""A fake /internal/context server on 127.0.0.1 that misbehaves on demand.

It redirects, sets cookies, hangs, drops connections, or answers huge or odd bodies.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import msgspec

from tests.fakes.openai_server import RecordedRequest, _read_request


@dataclass
class Reply:
    """One programmed answer: status, headers and body, or a hang, or a dropped connection."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False
    drop: bool = False


def success(data: Any, **extra: Any) -> Reply:
    """A §2 success envelope around `data` (extra top-level fields optional)."""
    return Reply(body={"code": 200, "message": "success", "data": data, **extra})


def failure(status: int, message: str) -> Reply:
    """An internal-API error envelope."""
    return Reply(status=status, body={"code": status, "message": message, "data": None})


class MisbehavingContextServer:
    """Answers each request with the next programmed Reply (the last one repeats)."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._replies: list[Reply] = []
        self._last = success({})
        self._server: asyncio.Server | None = None
        self._release = asyncio.Event()
        self._handlers: set[asyncio.Task] = set()
        self.port = 0

    @property
    def base_url(self) -> str:
        """http://127.0.0.1:PORT"""
        return f"http://127.0.0.1:{self.port}"

    def will(self, *replies: Reply) -> None:
        """Queue replies, in order."""
        self._replies.extend(replies)

    async def start(self) -> None:
        """Listen on a free loopback port."""
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Release hangs, close connections and stop listening."""
        self._release.set()
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            self.requests.append(await _read_request(reader))
            if self._replies:
                self._last = self._replies.pop(0)
            await self._answer(writer, self._last)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._handlers.discard(task)
            writer.close()

    async def _answer(self, writer: asyncio.StreamWriter, reply: Reply) -> None:
        if reply.hang:
            await self._release.wait()
            return
        if reply.drop:
            writer.transport.abort()
            return
        payload = reply.body if isinstance(reply.body, bytes) else msgspec.json.encode(reply.body)
        headers = {"Content-Type": "application/json", "Content-Length": str(len(payload)),
                   "Connection": "close", **reply.headers}
        head = f"HTTP/1.1 {reply.status} Reply\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        writer.write(head.encode() + b"\r\n" + payload)
        await writer.drain()
