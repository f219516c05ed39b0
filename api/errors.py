"""The one table that maps errors to HTTP: every refusal carries its code, the code names the status.

The external API answers `{code: <the code>, message, data: null}`; the internal context API
answers the same with `code` the HTTP status (its seed's numeric codes), from the same table.
"""

from __future__ import annotations

import logging
from typing import Any

from litestar import MediaType, Request, Response
from litestar.exceptions import (
    HTTPException,
    MethodNotAllowedException,
    NotAuthorizedException,
    NotFoundException,
    ValidationException,
)
from litestar.exceptions.http_exceptions import RequestEntityTooLarge

from domain.errors import FlowtrailError

logger = logging.getLogger("flowtrail.api")

HTTP_STATUS: dict[str, int] = {
    "VALIDATION_FAILED": 400,
    "GRAPH_INVALID": 400,
    "UNAUTHORIZED": 401,
    "FORBIDDEN": 403,
    "NOT_FOUND": 404,
    "WORKFLOW_NOT_FOUND": 404,
    "RUN_NOT_FOUND": 404,
    "NODE_NOT_FOUND": 404,
    "CLARIFY_NOT_FOUND": 404,
    "METHOD_NOT_ALLOWED": 405,
    "REQUEST_TIMEOUT": 408,
    "RUN_ALREADY_STARTED": 409,
    "CLARIFY_ALREADY_ANSWERED": 409,
    "IDEMPOTENCY_KEY_REUSED": 409,
    "RUN_STATE_CONFLICT": 409,
    "RUN_ALREADY_FINISHED": 410,
    "PAYLOAD_TOO_LARGE": 413,
    "URI_TOO_LONG": 414,
    "UNSUPPORTED_MEDIA_TYPE": 415,
    "TOO_MANY_STREAMS": 429,
    "RATE_LIMITED": 429,
    "HEADERS_TOO_LARGE": 431,
    "INTERNAL_ERROR": 500,
    "ENGINE_UNAVAILABLE": 503,
    "STORE_UNAVAILABLE": 503,
    "NOT_READY": 503,
    "CONTEXT_DISABLED": 503,
}
"""Every code a caller can be answered with, and its HTTP status."""

LIBRARY_ERRORS: list[tuple[type[HTTPException], str]] = [
    (NotAuthorizedException, "UNAUTHORIZED"),
    (ValidationException, "VALIDATION_FAILED"),
    (RequestEntityTooLarge, "PAYLOAD_TOO_LARGE"),
    (NotFoundException, "NOT_FOUND"),
    (MethodNotAllowedException, "METHOD_NOT_ALLOWED"),
]
"""Litestar's own refusals (routing, parameter validation, body size) and the codes they stand for."""

INTERNAL = (500, "INTERNAL_ERROR", "internal error; the failure was logged")
NOT_LOGGED = frozenset({"ENGINE_UNAVAILABLE", "STORE_UNAVAILABLE"})
"""503s that say how the service is, not that a request failed: the store logs its outage once, not per request."""
RETRY_AFTER = {"STORE_UNAVAILABLE": "1"}
"""The `Retry-After` (seconds) sent with codes a client should simply retry (an error's own `retry_after` wins)."""


class ApiError(FlowtrailError):
    """A refusal raised at the edge with a code of its own."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code  # type: ignore[misc]  # an instance's code, one of HTTP_STATUS

    @property
    def status(self) -> int:
        """The HTTP status of the code."""
        return HTTP_STATUS[self.code]


def validation_failed(message: str) -> ApiError:
    """400 VALIDATION_FAILED with a readable message."""
    return ApiError("VALIDATION_FAILED", message)


def classify(exc: BaseException) -> tuple[int, str, str]:
    """(HTTP status, code, message) for any exception; anything unknown is a failure of the service."""
    if isinstance(exc, FlowtrailError):
        status = HTTP_STATUS.get(exc.code)
        return INTERNAL if status is None else (status, exc.code, exc.message)
    for kind, code in LIBRARY_ERRORS:
        if isinstance(exc, kind):
            return HTTP_STATUS[code], code, _library_message(exc)
    if isinstance(exc, HTTPException) and exc.status_code < 500:
        return exc.status_code, "HTTP_ERROR", exc.detail
    return INTERNAL


def _library_message(exc: HTTPException) -> str:
    if isinstance(exc, RequestEntityTooLarge):
        return "the request body is over the size limit"
    if isinstance(exc, ValidationException):
        extra = exc.extra if isinstance(exc.extra, list) else []
        parts = [f"{_api_name(e)}: {e.get('message')}" for e in extra if isinstance(e, dict)]
        return "; ".join(parts) or exc.detail
    return exc.detail


def _api_name(error: dict[str, Any]) -> str:
    """What a refused value is called in the API: Litestar names a query or path parameter by its Python name
    (`created_after`), and every such parameter of the API is spelled in camelCase (`createdAfter`)."""
    name = str(error.get("key") or error.get("source"))
    if error.get("source") not in ("query", "path"):
        return name
    head, *rest = name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def envelope_error(status: int, code: str | int, message: str, headers: dict[str, str] | None = None) -> Response[Any]:
    """The documented error envelope."""
    return Response(
        content={"code": code, "message": message, "data": None},
        status_code=status, media_type=MediaType.JSON, headers=headers,
    )


def handle_exception(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    """Every error leaves as the documented envelope; unexpected ones are logged, not shown."""
    status, code, message = classify(exc)
    if status >= 500 and code not in NOT_LOGGED:
        logger.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    details = exc.details if isinstance(exc, FlowtrailError) else {}
    retry_after = details.get("retry_after", RETRY_AFTER.get(code))
    return envelope_error(status, code, message, None if retry_after is None else {"Retry-After": str(retry_after)})
