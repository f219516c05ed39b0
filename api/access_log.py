"""The outermost ASGI layer: one access log line and the HTTP metrics for every request, matched or not."""

from __future__ import annotations

import logging
import time

from litestar.types import ASGIApp, Message, Receive, Scope, Send

from api.paths import CONTEXT, HEALTH, METRICS, READY
from api.protocol import server_answer
from engine.observability.metrics import CONTEXT_QUERIES, HTTP_DURATION, HTTP_REQUESTS

logger = logging.getLogger("flowtrail.access")
UNMATCHED = "(unmatched)"
"""The route of a request no route matched (its path is not logged: it is the caller's text)."""
QUIET_ROUTES = frozenset({HEALTH, READY, METRICS})
"""Probes and scrapes: logged at DEBUG, so a load balancer's polling does not fill the log."""
CALLER_KEY_ID = "flowtrail.caller_key_id"
"""The key of the scope's `state` under which the `caller` dependency leaves the authenticated key's id."""


class AccessLog:
    """Logs method, route template, status, duration and key id of each request; never the key or a token.

    The status is the one the client got: the app's, or the server's own when it answered first (a body too late).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the request through the app, then log and count it."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            self._record(scope, server_answer(scope) or status, time.perf_counter() - began)

    def _record(self, scope: Scope, status: int, seconds: float) -> None:
        route = scope.get("path_template") or UNMATCHED
        method = str(scope.get("method", ""))
        HTTP_REQUESTS.labels(method, route, str(status)).inc()
        HTTP_DURATION.labels(method, route).observe(seconds)
        if route.startswith(CONTEXT):
            CONTEXT_QUERIES.labels(route.removeprefix(CONTEXT), str(status)).inc()
        fields = {
            "method": method, "route": route, "status": status, "duration_ms": round(seconds * 1000, 1),
            "key_id": self._key_id(scope),
        }
        level = logging.DEBUG if route in QUIET_ROUTES else logging.INFO
        logger.log(level, "request", extra=fields)

    def _key_id(self, scope: Scope) -> str:
        """The stable id of the key the request was served for; `-` when no key was authenticated."""
        key_id: str = scope.get("state", {}).get(CALLER_KEY_ID, "-")
        return key_id
