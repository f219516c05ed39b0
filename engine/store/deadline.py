"""The deadline of the request being served (a loop-clock time), for store calls made on its behalf."""

from __future__ import annotations

import contextvars

REQUEST_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("flowtrail_request_deadline", default=None)
