"""A fake /internal/context server on 127.0.0.1 that misbehaves on demand.

It redirects, sets cookies, hangs, drops connections, or answers huge or odd bodies.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import msgspec

from tests.fakes.loopback import LoopbackServer
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


class MisbehavingContextServer(LoopbackServer):
    """Answers each request with the next programmed Reply (the last one repeats)."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[RecordedRequest] = []
        self._replies: list[Reply] = []
        self._last = success({})

    @property
    def base_url(self) -> str:
        """http://127.0.0.1:PORT"""
        return f"http://127.0.0.1:{self.port}"

    def will(self, *replies: Reply) -> None:
        """Queue replies, in order."""
        self._replies.extend(replies)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Record the request and send the next reply."""
        self.requests.append(await _read_request(reader))
        if self._replies:
            self._last = self._replies.pop(0)
        await self._answer(writer, self._last)

    async def _answer(self, writer: asyncio.StreamWriter, reply: Reply) -> None:
        if reply.hang:
            await self.hang()
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
