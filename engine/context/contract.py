"""The internal context API's contract (seed §2), shared by its server (api/context.py) and the agent's tools.

The header, the routes, the request bodies, the meta kinds, the limits, the answer envelope and
the fields of each answer are written here once. The answer bodies themselves are the
projections' Structs (`projections.payloads`), so the fields a tool may read are theirs.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from projections.paths import MAX_PATH_DEPTH, MAX_PATHS
from projections.payloads import LogEntry, NodeMeta, NodeOutput, PathChain, PredecessorPaths, ToolCall
from projections.visits import DEFAULT_META_KIND, META_KINDS

__all__ = [
    "ANSWER_FIELDS", "DEFAULT_META_KIND", "ITEM_FIELDS", "MAX_BODY_BYTES", "MAX_PATHS", "MAX_PATH_DEPTH", "META_KINDS",
    "META_ROUTE", "OUTPUT_ROUTE", "PATH_ROUTE", "ROOT", "SUCCESS_CODE", "TOKEN_HEADER", "ContextAnswer", "MetaQuery",
    "OutputQuery", "PathQuery", "success",
]

TOKEN_HEADER = "X-Context-Token"
"""The only credential: a one-time token bound to one run and one visit."""

ROOT = "/internal/context"
PATH_ROUTE, OUTPUT_ROUTE, META_ROUTE = "/path", "/output", "/meta"
"""§2.1, §2.2 and §2.3, each `POST ROOT + route` with a JSON body."""

MAX_BODY_BYTES = 16 * 1024
"""A request body over this is 413."""

SUCCESS_CODE, SUCCESS_MESSAGE = 200, "success"
"""An answer's `code` is its HTTP status: 200 and "success", or the error's status and message."""

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


class ContextAnswer(msgspec.Struct):
    """The seed's envelope of every answer, success or error: `{code, message, data}`."""

    code: int
    message: str
    data: Any = None


def success(data: PredecessorPaths | NodeOutput | NodeMeta) -> ContextAnswer:
    """The envelope of a successful answer."""
    return ContextAnswer(SUCCESS_CODE, SUCCESS_MESSAGE, data)


def _wire_names(shape: type[msgspec.Struct]) -> tuple[str, ...]:
    return tuple(field.encode_name for field in msgspec.structs.fields(shape))


ANSWER_FIELDS = {
    PATH_ROUTE: _wire_names(PredecessorPaths), OUTPUT_ROUTE: _wire_names(NodeOutput), META_ROUTE: _wire_names(NodeMeta),
}
"""The fields of each answer's `data`: all a client may read of it."""

ITEM_FIELDS = {"paths": _wire_names(PathChain), "toolCalls": _wire_names(ToolCall), "logs": _wire_names(LogEntry)}
"""The fields of the items of an answer's lists."""
