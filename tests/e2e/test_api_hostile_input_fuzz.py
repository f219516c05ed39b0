"""Arbitrary client input over real HTTP, on every external endpoint and header (hypothesis, decision 15).

Path segments, query parameters, `X-API-Key`, `Last-Event-ID`, `Idempotency-Key`, JSON bodies
(shallow, deep, not JSON at all) and multipart parts with arbitrary filenames and
`X-Relative-Path`: no answer is a 5xx, every error is the envelope `{code, message, data: null}`,
and a refused request appends nothing to the log and leaves no upload folder.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote
from uuid import uuid4

import httpx
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.support.api import DEMO_KEY, SCOPED_KEY, log_end

EXAMPLES = 300
"""Requests drawn per store: bounded so the module runs in seconds."""
MILITARY = "military-analyze-agent"
WORKFLOWS = [MILITARY, "report-pipeline", "1", "2"]
DEPTHS = st.sampled_from([1, 2, 63, 64, 65, 1000, 5000])
"""Nesting depths around the limit and beyond Python's recursion limit."""
EVENT_TYPES = ["node_status", "node_stream", "visit_recorded", "planner_decision", "workflow_complete"]

HEADER_BYTES = st.binary(max_size=60).map(
    lambda raw: bytes(b for b in raw if b == 0x09 or 0x20 <= b <= 0x7E or b >= 0x80).strip()
)
"""Any bytes a header may carry on the wire (no control characters, no line breaks)."""
ODD_DIGITS = st.sampled_from(["9" * 5000, "²", "1¹²³", "0", "1", "3", "-1", "1e3", "2 3", "18446744073709551616"])
HEADER_VALUE = st.one_of(
    HEADER_BYTES, ODD_DIGITS.map(lambda s: s.encode("latin-1")), st.integers(0, 50).map(lambda n: str(n).encode()),
)
TEXT = st.text(max_size=40)
NAME = st.one_of(
    TEXT, st.sampled_from(["报" * 86 + ".md", "报" * 84 + ".md", "../x", "/abs", "a/../../b", "C:/x", "a\\b", "", "."]),
)
"""File names and relative paths: arbitrary text and the shapes the path rules are about."""
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4), max_leaves=20,
)


def deep(depth: int) -> bytes:
    """An array nested `depth` deep."""
    return b"[" * depth + b"]" * depth


CREATE_JSON = st.one_of(
    st.fixed_dictionaries({}, optional={"variables": st.dictionaries(TEXT, JSON, max_size=4), "async": st.booleans(),
                                        "ttlHours": st.integers(-5, 100_000)}).map(lambda d: json.dumps(d).encode()),
    JSON.map(lambda v: json.dumps(v).encode()),
    DEPTHS.map(lambda n: b'{"variables": {"x": ' + deep(n) + b"}}"),
    st.binary(max_size=80),
)
"""Creation bodies: well formed, any JSON, nested up to 5,000 deep, and bytes that are not JSON."""
RESUME_JSON = st.one_of(
    st.fixed_dictionaries({"clarifyId": TEXT, "answer": TEXT}).map(lambda d: json.dumps(d).encode()),
    DEPTHS.map(lambda n: b'{"clarifyId": "c", "answer": "a", "x": ' + deep(n) + b"}"),
    st.binary(max_size=80),
)


@dataclass
class Call:
    """One HTTP request to the service."""

    method: str
    path: str
    headers: dict[str, bytes] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    content: bytes | None = None
    files: list[tuple[str, Any]] | None = None


@st.composite
def calls(draw: Any, run_id: str) -> Call:
    """Any external endpoint, with arbitrary segments, headers, query parameters and bodies."""
    workflow = quote(draw(st.one_of(st.just(MILITARY), st.sampled_from(WORKFLOWS), TEXT, ODD_DIGITS)), safe="")
    run = quote(draw(st.one_of(st.just(run_id), st.just(run_id), st.just(uuid4().hex), TEXT)), safe="")
    runs = f"/api/v1/workflows/{workflow}/runs"
    endpoint = draw(st.sampled_from([
        ("GET", "/api/v1/workflows"), ("POST", runs), ("POST", runs), ("POST", runs),  # creation reads the most input
        ("POST", f"{runs}/{run}/start"), ("GET", f"{runs}/{run}/stream"), ("GET", f"{runs}/{run}"), ("GET", f"{runs}/{run}/workspace"), ("POST", f"{runs}/{run}/cancel"),
        ("GET", f"{runs}/{run}/nodes/{quote(draw(TEXT), safe='')}/logs"), ("POST", f"/api/v1/runs/{run}/resume"),
        ("GET", f"/api/v1/runs/{run}/state"), ("GET", f"/api/v1/runs/{run}/audit"),
    ]))
    method, path = endpoint
    call = Call(method, path, headers=draw(headers()), params=draw(query()))
    if endpoint == ("POST", runs):
        if draw(st.booleans()):
            call.content = draw(CREATE_JSON)
            call.headers["Content-Type"] = b"application/json"
        else:
            call.files = draw(multipart())
    elif endpoint[1].endswith("/resume"):
        call.content = draw(RESUME_JSON)
        call.headers["Content-Type"] = b"application/json"
    return call


def headers() -> st.SearchStrategy[dict[str, bytes]]:
    """`X-API-Key` (a real key most of the time), `Last-Event-ID` and `Idempotency-Key`, each maybe absent."""
    demo = st.just(DEMO_KEY.encode())
    key = st.one_of(demo, demo, demo, st.just(SCOPED_KEY.encode()), HEADER_VALUE)
    return st.fixed_dictionaries({"X-API-Key": key}, optional={
        "Last-Event-ID": HEADER_VALUE, "Idempotency-Key": HEADER_VALUE,
    }).map(lambda h: {k: v for k, v in h.items() if v or k != "X-API-Key"})


def query() -> st.SearchStrategy[dict[str, str]]:
    """The stream's parameters, with real and arbitrary values, and an unknown one."""
    types = st.one_of(st.lists(st.sampled_from(EVENT_TYPES), max_size=3).map(",".join), TEXT)
    return st.fixed_dictionaries({}, optional={
        "snapshot": st.one_of(st.sampled_from(["true", "false", "1", "maybe"]), TEXT), "types": types,
        "nodes": TEXT, "other": TEXT,
    })


def multipart() -> st.SearchStrategy[list[tuple[str, Any]]]:
    """A `payload` part (maybe) and `files` parts with arbitrary filenames and `X-Relative-Path`."""
    file_part = st.tuples(NAME, st.binary(max_size=16), st.one_of(st.none(), NAME)).map(
        lambda t: ("files", (t[0], t[1], "application/octet-stream", {} if t[2] is None else {"X-Relative-Path": t[2]}))
    )
    payload = CREATE_JSON.map(lambda raw: ("payload", (None, raw, "application/json")))
    return st.tuples(st.lists(payload, max_size=1), st.lists(file_part, max_size=3)).map(lambda t: t[0] + t[1])


def envelope_problem(response: httpx.Response, body: bytes) -> str | None:
    """Why an answer breaks the rules (None: it keeps them)."""
    if response.status_code >= 500:
        return f"server error {response.status_code}: {body[:300]!r}"
    if response.status_code < 400:
        return None
    try:
        got = json.loads(body)
    except ValueError:
        return f"error {response.status_code} is not JSON: {body[:200]!r}"
    if not isinstance(got, dict) or set(got) != {"code", "message", "data"} or got["data"] is not None:
        return f"error {response.status_code} is not the envelope: {body[:200]!r}"
    if not isinstance(got["code"], str) or not got["code"] or not isinstance(got["message"], str):
        return f"error {response.status_code} has no code or message: {body[:200]!r}"
    return None


def send(http: httpx.Client, call: Call) -> tuple[httpx.Response, bytes]:
    """The answer and its body; a stream that opens is closed at once (its body is not the point)."""
    headers = [(name.encode(), value) for name, value in call.headers.items()]
    request = http.build_request(
        call.method, call.path, headers=headers, params=call.params, content=call.content, files=call.files,
    )
    response = http.send(request, stream=True)
    try:
        streaming = response.headers.get("content-type", "").startswith(("text/event-stream", "application/zip"))
        body = b"" if response.status_code < 400 and streaming else response.read()
    finally:
        response.close()
    return response, body


def key(content_type: bytes | None = None) -> dict[str, bytes]:
    """The demo key's header (and a content type)."""
    return {"X-API-Key": DEMO_KEY.encode(), **({"Content-Type": content_type} if content_type else {})}


def workspace_dirs(api: Any) -> set[str]:
    root = api.settings.workspaces_dir
    return {p.name for p in root.iterdir()} if root.is_dir() else set()


def probe(api: Any, run_id: str, on_loop: Callable[[Coroutine[Any, Any, int]], int]) -> list[str]:
    """Draw requests; the problems found (empty: none)."""
    problems: list[str] = []
    runs = f"/api/v1/workflows/{MILITARY}/runs"

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(call=calls(run_id))
    @example(call=Call("POST", runs, key(), files=[("files", ("报" * 86 + ".md", b"x", "text/markdown"))]))
    @example(call=Call("POST", runs, key(), files=[("files", ("a", b"x", "text/plain", {"X-Relative-Path": "报" * 86}))]))
    @example(call=Call("POST", runs, key(), files=[("payload", (None, b'{"variables": {"x": ' + deep(1000) + b"}}", None))]))
    @example(call=Call("POST", runs, key(b"application/json"), content=b'{"variables": {"x": ' + deep(1000) + b"}}"))
    @example(call=Call("POST", f"/api/v1/runs/{run_id}/resume", key(b"application/json"),
                       content=b'{"clarifyId": "c", "answer": "a", "x": ' + deep(1000) + b"}"))
    @example(call=Call("GET", f"{runs}/{run_id}/stream", {**key(), "Last-Event-ID": "²".encode("latin-1")}))
    @example(call=Call("GET", f"{runs}/{run_id}/stream", {**key(), "Last-Event-ID": b"9" * 5000}))
    def check(call: Call) -> None:
        before_log, before_dirs = on_loop(log_end(api.services)), workspace_dirs(api)
        with httpx.Client(base_url=api.base_url, timeout=15) as http:
            response, body = send(http, call)
        what = f"{call.method} {call.path[:120]} {call.headers} {call.params}"
        problem = envelope_problem(response, body)
        if problem is None and response.status_code >= 400:
            if on_loop(log_end(api.services)) != before_log:
                problem = f"refused with {response.status_code} but appended to the log"
            elif workspace_dirs(api) != before_dirs:
                problem = f"refused with {response.status_code} but left an upload folder"
        if problem is not None:
            problems.append(f"{what} -> {problem}")

    check()
    return problems


async def test_arbitrary_input_on_every_endpoint_gets_no_server_error_and_a_refusal_changes_nothing(api, client):
    run_id = (await client.post("/api/v1/workflows/military-analyze-agent/runs", json={"variables": {"topic": "tides"}})).json()["data"]["runId"]
    loop = asyncio.get_running_loop()

    def on_loop(coroutine: Coroutine[Any, Any, int]) -> int:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(timeout=15)

    problems = await asyncio.to_thread(probe, api, run_id, on_loop)
    assert not problems, "\n".join(sorted(set(problems)))
