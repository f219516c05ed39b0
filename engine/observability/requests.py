"""The id of the HTTP request being served (`X-Request-Id`), and the run events it caused carry it.

The HTTP edge sets `REQUEST_ID` for the life of each request (api/access_log.py); work that outlives the
request (a run's task) runs without it. The events an API command appends (`RunCreated`, `RunStarted`,
`RunCancelRequested`, `ClarifyAnswered`) get the id in their `request_id` field when they are decided.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Sequence
from typing import TypeVar
from uuid import uuid4

import msgspec

REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("flowtrail_request_id", default=None)
"""The id of the request the current code serves (None: not serving a request)."""
_ACCEPTED = re.compile(r"^[A-Za-z0-9._:/+=@-]{1,128}$")
E = TypeVar("E", bound=msgspec.Struct)


def accepted_or_new(given: str | None) -> str:
    """The caller's request id when it is 1-128 characters of letters, digits and `._:/+=@-`; else a new one."""
    if given is not None and _ACCEPTED.match(given):
        return given
    return uuid4().hex


def stamped(event: E) -> E:
    """The event with the current request's id, when it has a `request_id` field and a request is being served."""
    request_id = REQUEST_ID.get()
    if request_id is None or "request_id" not in event.__struct_fields__:
        return event
    return msgspec.structs.replace(event, request_id=request_id)


def stamped_all(events: Sequence[E]) -> list[E]:
    """Each event stamped (see `stamped`)."""
    return [stamped(event) for event in events]


def outside_any_request(context: contextvars.Context) -> contextvars.Context:
    """The context without a request id (for work that outlives the request)."""
    context.run(REQUEST_ID.set, None)
    return context
