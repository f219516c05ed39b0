"""The agent's three context tools, calling /internal/context/* over loopback HTTP (seed §5, §9).

A toolbox belongs to one visit: it holds that visit's token, reads only whitelisted fields
of each answer, clips single values over 100 KB, gives up after at most one retry, discards
answers carrying Set-Cookie or Location, and stops answering after the per-visit call cap.
Tool results are JSON text for the model; failures are `{"error": ...}`, never exceptions.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

import httpx
import msgspec

from engine.context.contract import (
    ANSWER_FIELDS,
    DEFAULT_META_KIND,
    ITEM_FIELDS,
    MAX_PATHS,
    META_KINDS,
    META_ROUTE,
    OUTPUT_ROUTE,
    PATH_ROUTE,
    ROOT,
    SUCCESS_CODE,
    TOKEN_HEADER,
    MetaQuery,
    OutputQuery,
    PathQuery,
)
from engine.llm.types import ToolSpec
from engine.loopback import is_loopback_url
from engine.observability.tracing import trace_headers
from projections.wire import encode, to_json

log = logging.getLogger("flowtrail.context.tools")

MAX_TIMEOUT_SECONDS = 5.0
RETRY_BACKOFF_SECONDS = 0.2
MAX_VALUE_BYTES = 100 * 1024
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
_RETRY_STATUSES = frozenset({500, 502, 504})
_FORBIDDEN_HEADERS = ("set-cookie", "location")

PATHS, OUTPUT, META = "get_predecessor_paths", "get_node_output", "get_node_meta"
_ROUTES = {PATHS: PATH_ROUTE, OUTPUT: OUTPUT_ROUTE, META: META_ROUTE}

SPECS = (
    ToolSpec(
        name=PATHS,
        description=(
            "List every chain of earlier visits in this run that led to the current step, oldest first, "
            f"with back-edges (revisits) marked. Results may be truncated: at most {MAX_PATHS} paths are returned, "
            "and when `truncated` is true ask about a specific node with get_node_output or get_node_meta."
        ),
        parameters={"type": "object", "properties": {}, "additionalProperties": False},
    ),
    ToolSpec(
        name=OUTPUT,
        description=(
            "Read the output of an earlier visit of a node in this run: its whole `data`, or one field of it. "
            "Without iter_seq the node's last earlier visit is read."
        ),
        parameters={
            "type": "object",
            "properties": {
                "node_id": {"type": "string", "description": "The node whose output to read."},
                "field": {"type": ["string", "null"], "description": "One field of the output data; omit for all."},
                "iter_seq": {"type": ["integer", "null"], "minimum": 1,
                             "description": "Which visit of the node (1 = first); omit for the last."},
            },
            "required": ["node_id"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        name=META,
        description=(
            "Read what an earlier visit did on the way: its thinking, its tool calls, its last TODO list, "
            "or all of them with the raw log. Name the visit by visit_uuid, or by node_id and iter_seq."
        ),
        parameters={
            "type": "object",
            "properties": {
                "node_id": {"type": ["string", "null"], "description": "The node (used when visit_uuid is omitted)."},
                "visit_uuid": {"type": ["string", "null"], "description": "One exact visit; wins over node_id."},
                "kind": {"type": "string", "enum": list(META_KINDS), "default": DEFAULT_META_KIND},
                "iter_seq": {"type": ["integer", "null"], "minimum": 1,
                             "description": "Which visit of the node (1 = first); omit for the last."},
            },
            "additionalProperties": False,
        },
    ),
)



class ToolFailure(Exception):
    """A tool call that ends as `{"error": message}` for the model."""


def masked(token: str) -> str:
    """The first 4 characters of a token and `***`: the most of it that may ever be shown."""
    return token[:4] + "***"


def clip(value: Any, limit: int = MAX_VALUE_BYTES) -> tuple[Any, bool]:
    """The value with strings cut to `limit` bytes, lists cut to fit `limit`, objects over it as cut JSON text."""
    if isinstance(value, str):
        raw = value.encode()
        if len(raw) <= limit:
            return value, False
        return raw[:limit].decode(errors="ignore"), True
    if isinstance(value, list):
        kept: list[Any] = []
        size, cut = 2, False
        for item in value:
            item, item_cut = clip(item, limit)
            cut = cut or item_cut
            size += len(encode(item)) + 1
            if size > limit:
                return kept, True
            kept.append(item)
        return kept, cut
    if isinstance(value, dict):
        clipped, cut = {}, False
        for key, item in value.items():
            clipped[key], item_cut = clip(item, limit)
            cut = cut or item_cut
        if len(encode(clipped)) > limit:
            return clip(to_json(clipped), limit)[0], True
        return clipped, cut
    return value, False


def _whitelisted(tool: str, data: dict[str, Any]) -> dict[str, Any]:
    """Only the fields the tool knows, list items reduced to theirs, every value clipped."""
    result: dict[str, Any] = {}
    cut_fields = []
    for name in ANSWER_FIELDS[_ROUTES[tool]]:
        if name not in data:
            continue
        value = data[name]
        item_fields = ITEM_FIELDS.get(name)
        if item_fields is not None and isinstance(value, list):
            value = [{k: item[k] for k in item_fields if k in item} for item in value if isinstance(item, dict)]
        result[name], cut = clip(value)
        if cut:
            cut_fields.append(name)
    if cut_fields:
        result["truncated"] = True
        result["truncatedFields"] = cut_fields
    if tool == PATHS and (len(result.get("paths") or ()) >= MAX_PATHS or result.get("truncated")):
        result["note"] = "results may be truncated: query a specific node with get_node_output or get_node_meta"
    return result


def _optional_str(arguments: dict[str, Any], name: str) -> str | None:
    value = arguments.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ToolFailure(f"{name} must be a string")
    return value


def _iter_seq(arguments: dict[str, Any]) -> int | None:
    value = arguments.get("iter_seq")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ToolFailure("iter_seq must be a whole number >= 1")
    return value


class ContextToolbox:
    """One visit's three context tools; close it with `await aclose()` when the visit ends."""

    names = frozenset(_ROUTES)

    def __init__(
        self, *, base_url: str, run_id: UUID, visit_uuid: str, token: str,
        timeout_seconds: float = MAX_TIMEOUT_SECONDS, max_calls: int = 50,
        retry_backoff_seconds: float = RETRY_BACKOFF_SECONDS,
    ) -> None:
        if not is_loopback_url(base_url):
            raise ValueError("context tools only call a loopback base URL")
        self.run_id, self.visit_uuid = run_id, visit_uuid
        self.max_calls = max_calls
        self.calls = 0
        self.retry_backoff_seconds = retry_backoff_seconds
        self._token_hint = masked(token)
        self._client_options: dict[str, Any] = {
            "base_url": base_url, "timeout": httpx.Timeout(min(timeout_seconds, MAX_TIMEOUT_SECONDS)),
            "headers": {TOKEN_HEADER: token, "Content-Type": "application/json", "Accept": "application/json"},
        }
        self._http: httpx.AsyncClient | None = None

    @property
    def _client(self) -> httpx.AsyncClient:
        """The HTTP client, made at the first call (most visits make none; making one costs ~0.2 ms)."""
        if self._http is None:
            # Loopback only: loading a CA bundle per visit would cost ~24 ms of CPU for nothing.
            self._http = httpx.AsyncClient(follow_redirects=False, trust_env=False, verify=False, **self._client_options)
        return self._http

    def __repr__(self) -> str:
        return f"ContextToolbox(run={self.run_id.hex}, visit={self.visit_uuid}, token={self._token_hint})"

    def specs(self) -> list[ToolSpec]:
        """The three tools, for the model's request."""
        return list(SPECS)

    async def call(self, name: str, arguments: dict[str, Any] | None) -> str:
        """Run one tool call; its result (or `{"error": ...}`) as JSON text for the model."""
        self.calls += 1
        if self.calls > self.max_calls:
            return self._error(f"context tool call limit reached ({self.max_calls} calls per visit)")
        if name not in _ROUTES:
            return self._error(f"unknown tool {name[:64]!r}")
        try:
            body = self._body(name, arguments if isinstance(arguments, dict) else {})
            data = await self._post(ROOT + _ROUTES[name], body)
            return to_json(_whitelisted(name, data))
        except ToolFailure as exc:
            return self._error(str(exc))

    def _body(self, name: str, arguments: dict[str, Any]) -> PathQuery | OutputQuery | MetaQuery:
        run_id = self.run_id.hex
        if name == PATHS:
            return PathQuery(run_id, self.visit_uuid)
        iter_seq = _iter_seq(arguments)
        node_id = _optional_str(arguments, "node_id")
        if name == OUTPUT:
            if node_id is None:
                raise ToolFailure("node_id is required")
            return OutputQuery(run_id, node_id, _optional_str(arguments, "field"), iter_seq)
        visit_uuid = _optional_str(arguments, "visit_uuid")
        if node_id is None and visit_uuid is None:
            raise ToolFailure("give node_id or visit_uuid")
        kind = (_optional_str(arguments, "kind") or DEFAULT_META_KIND).upper()
        if kind not in META_KINDS:
            raise ToolFailure(f"kind must be one of {', '.join(META_KINDS)}")
        return MetaQuery(run_id, visit_uuid, node_id, kind, iter_seq)

    async def _post(self, path: str, body: PathQuery | OutputQuery | MetaQuery) -> dict[str, Any]:
        """POST once, and once more after a backoff if the connection failed or the server erred."""
        for attempt in (1, 2):
            try:
                return await self._post_once(path, body)
            except _Retryable as exc:
                if attempt == 2:
                    raise ToolFailure(str(exc)) from None
                await asyncio.sleep(self.retry_backoff_seconds)
        raise AssertionError("unreachable")

    async def _post_once(self, path: str, body: PathQuery | OutputQuery | MetaQuery) -> dict[str, Any]:
        try:
            async with self._client.stream("POST", path, content=encode(body), headers=trace_headers()) as response:
                for header in _FORBIDDEN_HEADERS:
                    if header in response.headers:
                        raise ToolFailure(f"context query response discarded: it carried a {header.title()} header")
                raw = await _read_capped(response)
                status = response.status_code
        except httpx.TimeoutException:
            raise ToolFailure("context query timed out") from None
        except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise _Retryable(f"context query failed: {type(exc).__name__}") from None
        except httpx.HTTPError as exc:
            raise ToolFailure(f"context query failed: {type(exc).__name__}") from None
        envelope = _decode(raw)
        if status != SUCCESS_CODE:
            message = envelope.get("message") if isinstance(envelope, dict) else None
            text = f"context query answered {status}"
            if isinstance(message, str):
                text += f": {clip(message, 300)[0]}"
            raise (_Retryable if status in _RETRY_STATUSES else ToolFailure)(text)
        if not isinstance(envelope, dict) or envelope.get("code") != SUCCESS_CODE or not isinstance(envelope.get("data"), dict):
            raise ToolFailure("context query answered with a malformed body")
        return envelope["data"]

    def _error(self, message: str) -> str:
        log.info("context tool call refused for visit %s: %s", self.visit_uuid, message)
        return to_json({"error": message})

    async def aclose(self) -> None:
        """Close the HTTP client, if a call made one."""
        if self._http is not None:
            await self._http.aclose()


class _Retryable(ToolFailure):
    """A failure worth one more try (connection trouble, a 500/502/504)."""


async def _read_capped(response: httpx.Response) -> bytes:
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise ToolFailure("context query response too large")
        chunks.append(chunk)
    return b"".join(chunks)


def _decode(raw: bytes) -> Any:
    try:
        return msgspec.json.decode(raw) if raw else None
    except msgspec.DecodeError:
        return None



def build_toolbox(base_url: str, run_id: UUID, visit_uuid: str, token: str, **options: Any) -> ContextToolbox | None:
    """A toolbox on `base_url`, or None with a warning when that URL is not loopback."""
    if not is_loopback_url(base_url):
        log.warning("context tools not offered: base URL %s is not a loopback address", urlsplit(base_url).hostname)
        return None
    return ContextToolbox(base_url=base_url, run_id=run_id, visit_uuid=visit_uuid, token=token, **options)
