"""The flowtrail HTTP client: runs created, started, read, listed, cancelled, answered and followed."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from functools import cache
from typing import Any, Generic, Protocol, TypeVar, cast

import httpx
import msgspec
from httpx_sse import aconnect_sse

from flowtrail_client.errors import ApiError, ServiceUnavailable
from flowtrail_client.stream import Reconnection, resuming
from flowtrail_client.types import (
    AuditView,
    CancelResult,
    CreatedRun,
    ErasedRun,
    EventLine,
    ForkedRun,
    ResumeResult,
    RunPage,
    RunState,
    RunView,
    StartedRun,
    StreamEvent,
    WorkflowView,
)

T = TypeVar("T")
API = "/api/v1"
DEFAULT_URL = "http://127.0.0.1:2438"


class NamedRun(Protocol):
    """Anything that names a run and its workflow (every run answer does)."""

    @property
    def run_id(self) -> str: ...

    @property
    def workflow_name(self) -> str: ...


@dataclass(frozen=True)
class RunHandle:
    """A run named by its id and its workflow's name (when both are known, e.g. from a listing)."""

    run_id: str
    workflow_name: str


RunRef = str | NamedRun
"""A run: its id, or an answer that names it (saves looking up its workflow)."""


class _Envelope(msgspec.Struct, Generic[T]):
    code: str
    message: str
    data: T


class _Refusal(msgspec.Struct):
    code: str = "HTTP_ERROR"
    message: str = ""


class _LineHead(msgspec.Struct):
    type: str
    originator_version: int


@cache
def _decoder(answer: Any) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(_Envelope[answer])


_refusal = msgspec.json.Decoder(_Refusal)
_head = msgspec.json.Decoder(_LineHead)


def refusal(response: httpx.Response) -> ApiError | ServiceUnavailable:
    """The error an answer that is not a success stands for (server errors: the service is unavailable)."""
    try:
        body = _refusal.decode(response.content)
    except msgspec.DecodeError:
        body = _Refusal(message=response.text[:200])
    if response.status_code >= 500:
        return ServiceUnavailable(f"{response.status_code} {body.code}: {body.message}")
    return ApiError(response.status_code, body.code, body.message)


def answer_of(response: httpx.Response, answer: type[T]) -> T:
    """The `data` of a success envelope, typed; raises what a refusal stands for."""
    if response.status_code >= 400:
        raise refusal(response)
    data: T = _decoder(cast(Any, answer)).decode(response.content).data
    return data


def json_lines(raw: bytes) -> tuple[list[bytes], bytes]:
    """The complete lines of a buffer and what is left after the last newline."""
    *lines, rest = raw.split(b"\n")
    return [line for line in lines if line.strip()], rest


class FlowtrailClient:
    """A typed, async client of one flowtrail service under one API key."""

    def __init__(
        self, base_url: str = DEFAULT_URL, key: str = "", *, timeout: float = 30.0,
        stream_read_timeout: float = 95.0, connect_timeout: float | None = None,
        reconnection: Reconnection = Reconnection(), transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        connect = timeout if connect_timeout is None else connect_timeout
        self.base_url = base_url.rstrip("/")
        self.http = httpx.AsyncClient(
            base_url=self.base_url, headers={"X-API-Key": key}, timeout=httpx.Timeout(timeout, connect=connect),
            transport=transport,
        )
        self.stream_timeout = httpx.Timeout(timeout, read=stream_read_timeout, connect=connect)
        self.reconnection = reconnection
        self._workflows: dict[str, str] = {}

    async def __aenter__(self) -> FlowtrailClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections."""
        await self.http.aclose()

    async def _call(self, method: str, path: str, answer: type[T], **request: Any) -> T:
        try:
            response = await self.http.request(method, path, **request)
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from exc
        return answer_of(response, answer)

    def _unreachable(self, exc: httpx.TransportError) -> ServiceUnavailable:
        return ServiceUnavailable(f"cannot reach the service at {self.base_url}: {exc or type(exc).__name__}")

    async def health(self) -> dict[str, Any]:
        """The service's liveness answer (`status`, `store`)."""
        return await self._call("GET", "/healthz", dict[str, Any])

    async def workflows(self) -> list[WorkflowView]:
        """The workflows the key may run, with their declared inputs and outputs."""
        return await self._call("GET", f"{API}/workflows", list[WorkflowView])

    async def create(
        self, workflow: str, variables: Mapping[str, Any] | None = None, *, ttl_hours: int | None = None,
        idempotency_key: str | None = None, files: Sequence[tuple[str, bytes]] = (),
    ) -> CreatedRun:
        """Create a run of a workflow (not started yet); `files` are (path in the workspace, content) pairs,
        sent as multipart."""
        body: dict[str, Any] = {"variables": dict(variables or {}), "async": True}
        if ttl_hours is not None:
            body["ttlHours"] = ttl_hours
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        path = f"{API}/workflows/{workflow}/runs"
        if files:
            parts: list[tuple[str, Any]] = [("payload", (None, json.dumps(body), "application/json"))]
            parts += [("files", (name, content, "application/octet-stream", {"X-Relative-Path": name}))
                      for name, content in files]
            created = await self._call("POST", path, CreatedRun, files=parts, headers=headers)
        else:
            created = await self._call("POST", path, CreatedRun, json=body, headers=headers)
        self._workflows[created.run_id] = created.workflow_name
        return created

    async def start(self, run: RunRef) -> StartedRun:
        """Start a created run."""
        return await self._call("POST", f"{await self._run_path(run)}/start", StartedRun)

    async def get(self, run: RunRef) -> RunView:
        """A run's status, outputs, nodes and workspace."""
        return await self._call("GET", await self._run_path(run), RunView)

    async def state(self, run: RunRef) -> RunState:
        """A run's status and the question it waits on, if any."""
        return await self._call("GET", f"{API}/runs/{run_id_of(run)}/state", RunState)

    async def list(
        self, *, status: str | Iterable[str] | None = None, workflow: str | None = None,
        created_after: str | None = None, created_before: str | None = None, limit: int | None = None,
        cursor: str | None = None, error_code: str | Iterable[str] | None = None,
    ) -> RunPage:
        """One page of the runs the key may see, newest first (pass `next_cursor` back for the next); `status`
        `WAITING` lists the runs waiting for an answer, `error_code` failed runs of those categories."""
        params: list[tuple[str, str | int]] = [("status", s) for s in _many(status)]
        params += [("errorCode", code) for code in _many(error_code)]
        named = {"workflow": workflow, "createdAfter": created_after, "createdBefore": created_before,
                 "limit": limit, "cursor": cursor}
        params += [(name, value) for name, value in named.items() if value is not None]
        return await self._call("GET", f"{API}/runs", RunPage, params=params)

    async def fork(
        self, run: RunRef, *, from_node: str | None = None, from_visit: str | None = None,
        workflow_version: int | None = None, variables: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> ForkedRun:
        """Fork a run at a finished visit (or a node's latest finished one): a new run, created, not started yet."""
        body: dict[str, Any] = {"variables": dict(variables or {})}
        named = {"fromNode": from_node, "fromVisit": from_visit, "workflowVersion": workflow_version}
        body.update({name: value for name, value in named.items() if value is not None})
        return await self._forked(f"{await self._run_path(run)}/fork", body, idempotency_key)

    async def rerun(self, run: RunRef, *, idempotency_key: str | None = None) -> ForkedRun:
        """Re-run a failed or cancelled run from its first failed visit: a new run, created, not started yet."""
        return await self._forked(f"{await self._run_path(run)}/rerun", {}, idempotency_key)

    async def _forked(self, path: str, body: dict[str, Any], idempotency_key: str | None) -> ForkedRun:
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        forked = await self._call("POST", path, ForkedRun, json=body, headers=headers)
        self._workflows[forked.run_id] = forked.workflow_name
        return forked

    async def forks(self, run: RunRef, *, limit: int | None = None, cursor: str | None = None) -> RunPage:
        """One page of the runs forked from this one, newest first."""
        params = {name: value for name, value in (("limit", limit), ("cursor", cursor)) if value is not None}
        return await self._call("GET", f"{await self._run_path(run)}/forks", RunPage, params=params)

    async def cancel(self, run: RunRef) -> CancelResult:
        """Ask for a run to be cancelled."""
        return await self._call("POST", f"{await self._run_path(run)}/cancel", CancelResult)

    async def erase(self, run: RunRef) -> ErasedRun:
        """Erase an ended run's content (its skeleton and hash chain stay); an erased run answers ALREADY_ERASED."""
        return await self._call("DELETE", await self._run_path(run), ErasedRun)

    async def answer(self, run: RunRef, clarify_id: str, answer: str) -> ResumeResult:
        """Answer the run's question; an answer given before (409 CLARIFY_ALREADY_ANSWERED) counts as success,
        reported with `accepted` false."""
        run_id = run_id_of(run)
        body = {"clarifyId": clarify_id, "answer": answer}
        try:
            return await self._call("POST", f"{API}/runs/{run_id}/resume", ResumeResult, json=body)
        except ApiError as refused:
            if refused.code != "CLARIFY_ALREADY_ANSWERED":
                raise
            return ResumeResult(accepted=False, run_id=run_id, clarify_id=clarify_id)

    async def audit(self, run: RunRef) -> AuditView:
        """The projections the service serves for a run (what `flowtrail audit` diffs with the log)."""
        return await self._call("GET", f"{API}/runs/{run_id_of(run)}/audit", AuditView)

    async def events(self, run: RunRef, *, after: int = 0) -> AsyncGenerator[EventLine, None]:
        """The run's stored events after a position, one by one as they arrive (JSON Lines)."""
        path = f"{API}/runs/{run_id_of(run)}/events"
        try:
            async with self.http.stream("GET", path, params={"after": after}, timeout=self.stream_timeout) as response:
                if response.status_code != 200:
                    await response.aread()
                    raise refusal(response)
                rest = b""
                async for chunk in response.aiter_bytes():
                    lines, rest = json_lines(rest + chunk)
                    for line in lines:
                        head = _head.decode(line)
                        yield EventLine(head.originator_version, head.type, line)
        except httpx.ConnectError as exc:
            raise self._unreachable(exc) from exc
        except httpx.TransportError as exc:
            raise ServiceUnavailable(f"the events of run {run_id_of(run)} broke off: {exc!r}") from exc

    def stream(self, run: RunRef, *, after: int = 0) -> AsyncGenerator[StreamEvent, None]:
        """The run's stream messages after a position, each once and in order, until the terminal one.

        Drops are resumed with `Last-Event-ID` after the configured delays (1/2/4/8/16 s), then
        the run is polled (every 30 s) until the service answers and the stream comes back.
        """
        return self._follow(run, after)

    async def _follow(self, run: RunRef, after: int) -> AsyncGenerator[StreamEvent, None]:
        path = f"{await self._run_path(run)}/stream"

        async def poll() -> object:
            return await self.get(run)

        async with aclosing(resuming(lambda last: self._connect(path, last), poll, after, self.reconnection)) as events:
            async for event in events:
                yield event

    async def _connect(self, path: str, after: int) -> AsyncGenerator[StreamEvent, None]:
        headers = {"Last-Event-ID": str(after)} if after else {}
        async with aconnect_sse(self.http, "GET", path, headers=headers, timeout=self.stream_timeout) as source:
            if source.response.status_code != 200:
                await source.response.aread()
                raise refusal(source.response)
            async for sse in source.aiter_sse():
                if sse.data and sse.id:
                    yield StreamEvent(int(sse.id), sse.event, json.loads(sse.data))

    async def _run_path(self, run: RunRef) -> str:
        """`/api/v1/workflows/{name}/runs/{id}`; a bare run id is looked up once (its first stored event names the workflow)."""
        run_id = run_id_of(run)
        workflow = run.workflow_name if not isinstance(run, str) else await self._workflow_of(run_id)
        return f"{API}/workflows/{workflow}/runs/{run_id}"

    async def _workflow_of(self, run_id: str) -> str:
        if run_id not in self._workflows:
            async with aclosing(self.events(run_id)) as lines:
                async for line in lines:
                    self._workflows[run_id] = str(line.data()["workflow_name"])
                    break
                else:
                    raise ApiError(404, "RUN_NOT_FOUND", f"run {run_id} has no events")
        return self._workflows[run_id]


def run_id_of(run: RunRef) -> str:
    """The run id a reference names."""
    return run if isinstance(run, str) else run.run_id


def _many(value: str | Iterable[str] | None) -> list[str]:
    """One value or several as a list (none: empty)."""
    return [value] if isinstance(value, str) else list(value or ())
