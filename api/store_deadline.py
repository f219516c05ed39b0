"""Each HTTP request may wait for the store this long: the deadline the store's retries keep to.

While the store is away, a request's reads and writes are retried until the deadline, then the
request answers `503 STORE_UNAVAILABLE` (engine/store/async_store.py) instead of hanging.
"""

from __future__ import annotations

from litestar.types import ASGIApp, Receive, Scope, Send

from engine.store.deadline import REQUEST_DEADLINE, deadline_in


class StoreDeadline:
    """Sets the request's store deadline (now + `seconds`) around every HTTP request."""

    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the request with the deadline set; it is unset afterwards."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = REQUEST_DEADLINE.set(deadline_in(self.seconds))
        try:
            await self.app(scope, receive, send)
        finally:
            REQUEST_DEADLINE.reset(token)
