"""POST /internal/context/{path,output,meta}: what earlier visits produced, for an agent's tools.

Not under X-API-Key and not in the external OpenAPI document: a one-time context token in
`X-Context-Token` is the only credential, and loopback is the only place it is accepted from.
Answers and errors use the seed's own envelope `{code: <int>, message, data}`.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable
from typing import Annotated, Any

import msgspec
from litestar import Controller, MediaType, Request, Response, Router, post
from litestar.di import NamedDependency
from litestar.exceptions import HTTPException

from engine.bootstrap import Services
from engine.context.tokens import ContextTokenError, require_run
from engine.context.views import (
    AskerView,
    ColdIndexes,
    ContextDisabled,
    asker_view,
    meta_body,
    output_body,
    path_body,
)
from engine.runs.service import RunNotFound
from projections.payloads import NodeMeta, NodeOutput, PredecessorPaths
from projections.visits import UnknownMetaKind, VisitNotFound
from projections.wire import encode

log = logging.getLogger("flowtrail.api.context")

TOKEN_HEADER = "X-Context-Token"
MAX_BODY_BYTES = 16 * 1024

RunId = Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
IterSeq = Annotated[int, msgspec.Meta(ge=1)]


class PathQuery(msgspec.Struct, rename="camel", frozen=True):
    """§2.1 request: the run and the visit whose predecessors are asked for (null: the asker's own)."""

    run_id: RunId
    visit_uuid: Name | None = None


class OutputQuery(msgspec.Struct, rename="camel", frozen=True):
    """§2.2 request: a node, one field of its data (null: all), which visit (null: the last)."""

    run_id: RunId
    node_id: Name
    field: Name | None = None
    iter_seq: IterSeq | None = None


class MetaQuery(msgspec.Struct, rename="camel", frozen=True):
    """§2.3 request: a visit by uuid, or a node and iterSeq, and the kind (null: ALL)."""

    run_id: RunId
    visit_uuid: Name | None = None
    node_id: Name | None = None
    kind: Name | None = None
    iter_seq: IterSeq | None = None


ContextBody = PredecessorPaths | NodeOutput | NodeMeta


class BadContextQuery(ValueError):
    """The request body is not a valid query (400)."""


class NotLoopback(PermissionError):
    """The request came from another host; the endpoints do not exist for it (404)."""


_decoders = {kind: msgspec.json.Decoder(kind) for kind in (PathQuery, OutputQuery, MetaQuery)}
_NO_STORE = {"Cache-Control": "no-store"}


def is_loopback(host: str | None) -> bool:
    """True for 127.0.0.0/8, ::1 and IPv4-mapped loopback addresses."""
    try:
        address = ipaddress.ip_address(host or "")
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def classify(exc: BaseException) -> tuple[int, str]:
    """(status, message) of an internal-API error; the message never carries a token."""
    if isinstance(exc, ContextTokenError):
        return exc.status, exc.message
    if isinstance(exc, ContextDisabled):
        return 503, "context query is disabled"
    if isinstance(exc, (BadContextQuery, UnknownMetaKind)):
        return 400, str(exc)
    if isinstance(exc, VisitNotFound):
        return 404, exc.message
    if isinstance(exc, RunNotFound):
        return 404, "run not found"
    if isinstance(exc, NotLoopback):
        return 404, "not found"
    if isinstance(exc, HTTPException):
        return exc.status_code, exc.detail
    return 500, "internal error; the failure was logged"


def handle_context_error(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    """Every internal-API error as `{code, message, data: null}` with the same HTTP status."""
    status, message = classify(exc)
    if status >= 500 and status != 503:
        log.exception("context query on %s failed", request.url.path, exc_info=exc)
    return Response(
        content={"code": status, "message": message, "data": None},
        status_code=status, media_type=MediaType.JSON, headers=_NO_STORE,
    )


async def _answer(
    request: Request[Any, Any, Any], services: Services, cold: ColdIndexes, kind: type[Any],
    build: Callable[[AskerView, Any], ContextBody],
) -> Response[bytes]:
    """Loopback, switch, token, body, run, then the view: in that order, so refusals leak nothing."""
    if not is_loopback(request.client.host if request.client else None):
        raise NotLoopback()
    if not services.settings.context.enabled:
        raise ContextDisabled()
    grant = services.tokens.authenticate(request.headers.get(TOKEN_HEADER))
    try:
        query = _decoders[kind].decode(await request.body())
    except msgspec.DecodeError as exc:
        raise BadContextQuery(f"invalid request body: {exc}") from None
    require_run(grant, query.run_id)
    view = await asker_view(services, grant, cold)
    body = {"code": 200, "message": "success", "data": build(view, query)}
    return Response(
        content=encode(body), status_code=200, media_type=MediaType.JSON,
        headers={**_NO_STORE, "X-Context-Source": view.source},
    )


def _meta(view: AskerView, query: MetaQuery) -> NodeMeta:
    if not query.visit_uuid and not query.node_id:
        raise BadContextQuery("a meta query needs a visitUuid or a nodeId")
    return meta_body(view, query.visit_uuid, query.node_id, query.kind, query.iter_seq)


class ContextQueryController(Controller):
    """The internal context query API (seed §2); the one instance per app keeps the cold folds."""

    path = "/internal/context"
    include_in_schema = False
    exception_handlers = {Exception: handle_context_error}
    request_max_body_size = MAX_BODY_BYTES

    def __init__(self, owner: Router) -> None:
        super().__init__(owner)
        self.cold = ColdIndexes()

    @post("/path", operation_id="contextPath", status_code=200)
    async def query_path(self, request: Request[Any, Any, Any], services: NamedDependency[Services]) -> Response[bytes]:
        """§2.1: every chain of earlier visits leading to the asking visit."""
        return await _answer(request, services, self.cold, PathQuery, lambda view, q: path_body(view, q.visit_uuid))

    @post("/output", operation_id="contextOutput", status_code=200)
    async def query_output(
        self, request: Request[Any, Any, Any], services: NamedDependency[Services]
    ) -> Response[bytes]:
        """§2.2: an earlier visit's output envelope, whole or one field."""
        return await _answer(
            request, services, self.cold, OutputQuery, lambda view, q: output_body(view, q.node_id, q.field, q.iter_seq)
        )

    @post("/meta", operation_id="contextMeta", status_code=200)
    async def query_meta(self, request: Request[Any, Any, Any], services: NamedDependency[Services]) -> Response[bytes]:
        """§2.3: an earlier visit's thinking, tool calls, TODO list, or all with logs."""
        return await _answer(request, services, self.cold, MetaQuery, _meta)
