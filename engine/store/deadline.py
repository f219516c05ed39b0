"""How long the store may keep the current request waiting: a `time.monotonic()` deadline, or None.

The HTTP edge sets it for each request (api/store_deadline.py); run execution works with
none, so its reads and writes are retried for the store's longer write-retry time.
"""

from __future__ import annotations

import contextvars
import time

REQUEST_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "flowtrail_request_deadline", default=None
)
"""The `time.monotonic()` by which the store must answer the current request (None: not in a request)."""


def deadline_in(seconds: float) -> float:
    """The monotonic deadline `seconds` from now."""
    return time.monotonic() + seconds


def outside_requests() -> contextvars.Context:
    """A copy of the current context without a request deadline (for work that outlives the request)."""
    context = contextvars.copy_context()
    context.run(REQUEST_DEADLINE.set, None)
    return context
