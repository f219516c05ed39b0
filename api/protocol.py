"""uvicorn's httptools protocol with the connection guards it lacks: a header timeout, limits on the size of request
heads, a time bound on request bodies, a stuck-client cut and a response deadline the app may set."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import struct
import termios
from collections.abc import Mapping
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from api.body_clock import BodyClock, TimedFlowControl
from api.errors import ApiError, validation_failed
from api.head_limits import HeadCount, refusal
from engine.limits import LimitSettings
from engine.settings import Settings

log = logging.getLogger("flowtrail.server")


RESPONSE_DEADLINE = "flowtrail.response_deadline"
"""The ASGI scope extension that ends the response in progress after some seconds, even when its client reads nothing."""
SERVER_ANSWER = "flowtrail.server_answer"
"""The ASGI scope extension where the protocol leaves the status it answered itself (a body that came too late)."""


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the timeouts it lacks.

    * **header read**: a connection waiting for a request's headers (fresh, or between requests)
      that has not sent them whole within `limits.header_timeout_seconds` is closed (uvicorn's
      keep-alive timer stops at the first byte of a request, so a half-sent request would be kept forever);
    * **head size**: a head over its limits (`limits.max_*`: bytes, header lines, one line, the
      target) is answered `431`/`414` and the connection closed as soon as the bytes that prove it
      arrived (api.head_limits): the parser is never fed more of an open head than it may take;
    * **body time**: a body still arriving `BodyClock` seconds after its head is answered `408` (the
      app sees the client gone, so nothing is stored), or cut when its response has begun;
    * **stuck client**: while the transport's write buffer is over its high-water mark (uvicorn's
      `send` then waits for it to drain), a client that takes no bytes for `stuck_seconds` (the
      buffer did not shrink) is cut (`abort`: what it did not take is dropped, not flushed);
    * **response deadline**: the scope extension `RESPONSE_DEADLINE` lets the app cut its response
      after a time, for a stream whose client is stuck where the app cannot end it.
    """

    limits = LimitSettings()
    stuck_seconds = 60.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # uvicorn's own signature
        """Start waiting for the first request's headers."""
        self._header_timer: asyncio.TimerHandle | None = None
        self._stuck_timer: asyncio.TimerHandle | None = None
        self._deadline_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._head: HeadCount | None = None
        self._body: BodyClock | None = None
        self._idle = True
        """No request is being parsed: the next byte begins one."""
        self._begun = 0
        self._refused = False
        super().connection_made(transport)
        self.flow = self._timed_flow = TimedFlowControl(transport)
        self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop every timer of the connection."""
        for timer in (self._header_timer, self._stuck_timer, self._deadline_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """uvicorn's, feeding the parser no more of an open head than it may still take, then watching the body."""
        if self._refused:
            return
        self._unset_keepalive_if_required()
        rest = memoryview(data)
        while rest:
            size = self._feedable(len(rest))
            if not self._feed(rest[:size]):
                return
            rest = rest[size:]
        self._watch_body()

    def _feedable(self, size: int) -> int:
        """How much of `size` bytes to feed at once: within an open head (or when the next byte begins one) at most
        what the head may still take; in a body all."""
        if self._head is not None:
            return min(size, self._head.budget())
        return min(size, self.limits.max_head_bytes) if self._idle else size

    def _feed(self, piece: memoryview) -> bool:
        """Feed the parser; False when the connection is done (refused, malformed, upgraded)."""
        idle, begun = self._idle, self._begun
        try:
            self.parser.feed_data(piece)
            if self._head is not None:
                self._count_head(len(piece), began=self._begun - begun, at_start=idle)
        except ApiError as error:
            self._refuse(error)
            return False
        except httptools.HttpParserError as exc:
            if isinstance(exc.__context__, ApiError):
                self._refuse(exc.__context__)
                return False
            self._refuse(validation_failed(f"the request is not valid HTTP/1.1 ({exc})"))
            return False
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return False
        return True

    def _count_head(self, size: int, *, began: int, at_start: bool) -> None:
        """Count a fed piece into the open head: all of it when the head was open before or began with it."""
        assert self._head is not None
        if began == 0 or (began == 1 and at_start):
            self._head.fed(size, from_start=began == 1)
        else:
            self._head.began_inside()

    def _refuse(self, error: ApiError) -> None:
        """Answer a head over its limits and close; with a response still being sent on the connection, let it end
        and close then, unanswered."""
        self._refused = True
        path = self._head.path() if self._head is not None else ""
        self._head = None
        log.info("request from %s refused: %d %s: %s", _peer(self.client), error.status, error.code, error.message)
        if self.pipeline or (self.cycle is not None and not self.cycle.response_complete):
            self.flow.pause_reading()
            if self.cycle is not None:
                self.cycle.keep_alive = False
            return
        self.transport.write(refusal(error, path, self.server_state.default_headers))
        self.transport.close()

    def _await_headers(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.limits.header_timeout_seconds, self._headers_timed_out)

    def _headers_timed_out(self) -> None:
        self._header_timer = None
        self.transport.close()

    def on_message_begin(self) -> None:
        """A request begins: its head is counted; offer the app the response deadline."""
        self._idle = False
        self._begun += 1
        self._head = HeadCount(self.limits)
        super().on_message_begin()
        self.scope["extensions"] = {RESPONSE_DEADLINE: self._response_deadline}  # type: ignore[dict-item]  # ASGI types extensions as dicts

    def on_url(self, url: bytes) -> None:
        """A piece of the request target: counted first."""
        if self._head is not None:
            self._head.url(url)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        """A header line: counted first."""
        if self._head is not None:
            self._head.header(name, value)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        """The headers are in (and within the limits): the header timer stops, the body's clock starts."""
        if self._head is not None:
            self._head.complete(self.parser.get_method())
        self._head = None
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        super().on_headers_complete()
        if self.cycle is not None and self.cycle.scope is self.scope:
            self._body = BodyClock(self.limits, self._timed_flow)

    def on_body(self, body: bytes) -> None:
        """A piece of the body: counted on its clock."""
        if self._body is not None:
            self._body.received += len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        """The request is in whole: its body's clock stops."""
        self._idle = True
        self._body = None
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        super().on_message_complete()

    def _watch_body(self) -> None:
        """A body is on its way: check its clock when it would run out."""
        if self._body is not None and self._body_timer is None:
            self._body_timer = self.loop.call_later(max(0.0, self._body.seconds_left()), self._check_body)

    def _check_body(self) -> None:
        self._body_timer = None
        body = self._body
        if body is None:
            return
        if self.cycle.waiting_for_100_continue:
            body.restart()
        if body.seconds_left() > 0:
            self._watch_body()
            return
        self._body = None
        if self.cycle.response_started or self.pipeline:
            self._cut("its request body did not arrive in time")
            return
        self._body_late(body)

    def _body_late(self, body: BodyClock) -> None:
        """Answer 408 for a body that did not arrive in time; the app sees its client gone (so stores nothing)."""
        cycle = self.cycle
        error = ApiError("REQUEST_TIMEOUT", body.late())
        log.info("request from %s answered %d %s", _peer(self.client), error.status, error.code)
        cycle.scope["extensions"][SERVER_ANSWER] = {"status": error.status}
        cycle.disconnected = True
        cycle.message_event.set()
        self._refused = True
        self.transport.write(refusal(error, cycle.scope["path"], self.server_state.default_headers))
        self.transport.close()

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


def guarded_protocol(*, limits: LimitSettings, stuck_seconds: float) -> type[GuardedHttpToolsProtocol]:
    """The guarded protocol with these limits and timeouts."""
    return type("FlowtrailHttpProtocol", (GuardedHttpToolsProtocol,),
                {"limits": limits, "stuck_seconds": stuck_seconds})


def connection_options(settings: Settings) -> dict[str, Any]:
    """What `uvicorn.Config` is given for connections: the guarded protocol and the idle (keep-alive) timeout."""
    return {
        "http": guarded_protocol(limits=settings.limits, stuck_seconds=settings.stream.stuck_seconds),
        "timeout_keep_alive": settings.limits.idle_timeout_seconds,
    }


def response_deadline(scope: Mapping[str, Any], seconds: float) -> None:
    """Cut this request's connection after `seconds` if its response has not ended (no-op under another server)."""
    cut = (scope.get("extensions") or {}).get(RESPONSE_DEADLINE)
    if cut is not None:
        cut(seconds)


def server_answer(scope: Mapping[str, Any]) -> int | None:
    """The status the protocol answered this request with itself, instead of the app's (None: the app's stands)."""
    answer = (scope.get("extensions") or {}).get(SERVER_ANSWER) or {}
    status = answer.get("status")
    return status if isinstance(status, int) else None
