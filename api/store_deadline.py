"""Each HTTP request may wait for the store this long before its answer begins: the deadline the store's retries keep to.

While the store is away, a request's reads and writes are retried until the deadline, then the
request answers `503 STORE_UNAVAILABLE` (engine/store/async_store.py) instead of hanging. Once
the answer has begun (its status line is sent), a 503 can no longer be given: the reads of a
streamed body (an export, an SSE replay) are then retried as work outside requests is, for the
store's write-retry time, instead of being cut at a deadline that has long passed.
"""

from __future__ import annotations

from litestar.types import ASGIApp, Message, Receive, Scope, Send

from engine.store.deadline import REQUEST_DEADLINE, deadline_in


class StoreDeadline:
    """Sets the request's store deadline (now + `seconds`) around every HTTP request, until its answer begins."""

    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the request with the deadline set; it is unset once the answer begins, and afterwards."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def answer(message: Message) -> None:
            if message["type"] == "http.response.start":
                REQUEST_DEADLINE.set(None)
            await send(message)

        token = REQUEST_DEADLINE.set(deadline_in(self.seconds))
        try:
            await self.app(scope, receive, answer)
        finally:
            REQUEST_DEADLINE.reset(token)
