"""uvicorn's httptools protocol with the connection guards it lacks: a header timeout, a stuck-client cut and a
response deadline the app may set."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import struct
import termios
from collections.abc import Mapping
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from engine.settings import Settings

log = logging.getLogger("flowtrail.server")


RESPONSE_DEADLINE = "flowtrail.response_deadline"
"""The ASGI scope extension that ends the response in progress after some seconds, even when its client reads nothing."""


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the timeouts it lacks.

    * **header read**: a connection waiting for a request's headers (fresh, or between requests)
      that has not sent them whole within `header_timeout` seconds is closed (uvicorn's keep-alive
      timer stops at the first byte of a request, so a half-sent request would be kept forever);
    * **stuck client**: while the transport's write buffer is over its high-water mark (uvicorn's
      `send` then waits for it to drain), a client that takes no bytes for `stuck_seconds` (the
      buffer did not shrink) is cut (`abort`: what it did not take is dropped, not flushed);
    * **response deadline**: the scope extension `RESPONSE_DEADLINE` lets the app cut its response
      after a time, for a stream whose client is stuck where the app cannot end it.
    """

    header_timeout = 10.0
    stuck_seconds = 60.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # uvicorn's own signature
        """Start waiting for the first request's headers."""
        self._header_timer: asyncio.TimerHandle | None = None
        self._stuck_timer: asyncio.TimerHandle | None = None
        self._deadline_timer: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop every timer of the connection."""
        for timer in (self._header_timer, self._stuck_timer, self._deadline_timer):
            if timer is not None:
                timer.cancel()
        super().connection_lost(exc)

    def _await_headers(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout, self._headers_timed_out)

    def _headers_timed_out(self) -> None:
        self._header_timer = None
        self.transport.close()

    def on_message_begin(self) -> None:
        """A request begins: offer the app the response deadline."""
        super().on_message_begin()
        self.scope["extensions"] = {RESPONSE_DEADLINE: self._response_deadline}  # type: ignore[dict-item]  # ASGI types extensions as dicts

    def on_headers_complete(self) -> None:
        """The headers are in: the header timer stops."""
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        """A response ended: wait for the next request's headers (unless one is queued already)."""
        waiting = not self.pipeline
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None
        super().on_response_complete()
        if waiting and not self.transport.is_closing():
            self._await_headers()

    def pause_writing(self) -> None:
        """The write buffer is full: the client must take bytes within `stuck_seconds`, and again after that."""
        super().pause_writing()
        if self._stuck_timer is None:
            self._watch_progress(-1)

    def resume_writing(self) -> None:
        """The client took most of the buffer."""
        if self._stuck_timer is not None:
            self._stuck_timer.cancel()
            self._stuck_timer = None
        super().resume_writing()

    def _watch_progress(self, before: int) -> None:
        """Cut the connection when what it has to send did not shrink since the last look."""
        left = self._unsent()
        if left and left == before:
            self._cut("it took no bytes for the stuck-client time")
            return
        self._stuck_timer = self.loop.call_later(self.stuck_seconds, self._watch_progress, left)

    def _unsent(self) -> int:
        """Bytes the client has not taken: the transport's buffer, plus the socket's unacknowledged send queue
        (the kernel wakes the transport only once much of that queue is gone, long after a slow client began
        taking bytes)."""
        unsent = self.transport.get_write_buffer_size()
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError, ValueError):
                unsent += struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]
        return unsent

    def _response_deadline(self, seconds: float) -> None:
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
        self._deadline_timer = self.loop.call_later(seconds, self._cut, "its response outlived its deadline")

    def _cut(self, reason: str) -> None:
        self._stuck_timer = self._deadline_timer = None
        log.info("connection from %s cut: %s", _peer(self.client), reason)
        self.transport.abort()


def _peer(client: tuple[str, int] | None) -> str:
    return f"{client[0]}:{client[1]}" if client else "?"


def guarded_protocol(*, header_timeout: float, stuck_seconds: float) -> type[GuardedHttpToolsProtocol]:
    """The guarded protocol with these timeouts."""
    return type("FlowtrailHttpProtocol", (GuardedHttpToolsProtocol,),
                {"header_timeout": header_timeout, "stuck_seconds": stuck_seconds})


def connection_options(settings: Settings) -> dict[str, Any]:
    """What `uvicorn.Config` is given for connections: the guarded protocol and the idle (keep-alive) timeout."""
    return {
        "http": guarded_protocol(header_timeout=settings.limits.header_timeout_seconds,
                                 stuck_seconds=settings.stream.stuck_seconds),
        "timeout_keep_alive": settings.limits.idle_timeout_seconds,
    }


def response_deadline(scope: Mapping[str, Any], seconds: float) -> None:
    """Cut this request's connection after `seconds` if its response has not ended (no-op under another server)."""
    cut = (scope.get("extensions") or {}).get(RESPONSE_DEADLINE)
    if cut is not None:
        cut(seconds)
