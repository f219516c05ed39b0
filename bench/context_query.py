"""Context query latency: p50/p99 over HTTP on loopback, from memory and from the store, beside §6.

Target (issue 5): p99 <= 1/5 of each baseline of the seed's §6 (path 5/50 ms, output 3/30 ms,
meta ALL 10/50 ms, memory/store).

One process serves and measures. The server is the service as `flowtrail serve` builds it
(`build_services`, uvicorn with uvloop and httptools) in the main event loop; the run is
driven through RunWriter in that loop: 50 visits in a chain N0 -> ... -> N49, each of the
first 49 with thinking, 10 tool calls and results, a TODO list and a ~1 KB output, the last
one open (it asks). Its token is issued in-process and never leaves the process. The client
is a thread with one keep-alive socket speaking minimal HTTP/1.1, timing each request from
send to the last byte of the answer; requests go one at a time (no concurrency). Set-up
garbage is collected before each measurement (`gc.collect()`, no other GC tuning).

Queries: `path` of the asking visit (50 visits on the chain), `output` of N25 (whole data),
`meta` ALL of N25 (thinking, tool calls, TODO list and its 23 raw log lines), each from:

* memory            - the run is hot (its live visit index);
* store             - the run was dropped from memory: every request reads the store for the
                      events after the position already folded (none, here) and answers from
                      that fold, which the controller keeps for cold runs;
* store, first read - the controller keeps no fold (`max_runs = 0`), so every request reads
                      the run's 1,179 events from the store and folds them afresh: the cost of
                      the first question about a cold run, e.g. after a restart.

The answer's X-Context-Source header is checked, and every store answer must be byte-identical
to the memory one.

    python -m bench.context_query [--store both|sqlite|postgres] [--requests 2000] [--warmup 200] [--first-reads 500]
"""

from __future__ import annotations

import asyncio
import gc
import json
import socket
import time
import uuid
from dataclasses import replace
from typing import Any

import uvicorn
from litestar import Litestar

from api.app import create_app
from api.context import ContextQueryController
from api.sse import encode_frame
from bench.common import (
    FLOW,
    Fleet,
    bench_main,
    free_port,
    ms,
    percentile,
    print_table,
    verdict,
)
from domain import run as decide
from engine.bootstrap import Services, build_services
from engine.context.views import ColdIndexes
from engine.settings import Settings, StoreSettings

VISITS = 50
TARGET_NODE = "N25"
BASELINES_MS = {("path", "memory"): 5.0, ("path", "store"): 50.0, ("output", "memory"): 3.0,
                ("output", "store"): 30.0, ("meta ALL", "memory"): 10.0, ("meta ALL", "store"): 50.0}
QUERIES = {
    "path": ("/internal/context/path", {"visitUuid": None}),
    "output": ("/internal/context/output", {"nodeId": TARGET_NODE, "field": None, "iterSeq": None}),
    "meta ALL": ("/internal/context/meta", {"nodeId": TARGET_NODE, "kind": "ALL"}),
}


async def build_run(services: Services) -> tuple[uuid.UUID, str]:
    """The 50-visit chain; returns (run id, the asking visit's uuid)."""
    created = await services.runs.create(caller_key_id="bench", **FLOW)
    run_id = created.originator_id
    writer = await services.runs.writer(run_id)
    await writer.decide(decide.start_run)
    previous: str | None = None
    for i in range(VISITS):
        node, visit = f"N{i}", uuid.uuid4().hex

        def start(run: Any, at: Any, node: str = node, visit: str = visit, previous: str | None = previous,
                  i: int = i) -> Any:
            return decide.start_visit(run, at, visit_uuid=visit, node_id=node, node_type="agent", node_label=node,
                                      iter_seq=1, sort_order=i + 1, from_visit_uuid=previous,
                                      from_node_id=f"N{i - 1}" if previous else None)

        await writer.decide(start)
        if i == VISITS - 1:
            await writer.flush()
            return run_id, visit
        await writer.stream(visit_uuid=visit, node_id=node, kind="thinking", content="Looking at the sources. " * 8)
        for call in range(10):
            await writer.stream(visit_uuid=visit, node_id=node, kind="tool_call", tool_name="search",
                                content=json.dumps({"q": f"query {call}"}))
            await writer.stream(visit_uuid=visit, node_id=node, kind="tool_result", tool_name="search",
                                content="result " * 20)
        await writer.stream(visit_uuid=visit, node_id=node, kind="todo_update",
                            content=json.dumps([{"text": f"task {t}", "status": "completed"} for t in range(5)]))
        output = {"status": 200, "message": "ok", "data": {"index": i, "summary": "finding " * 120, "score": 0.5}}
        await writer.decide(lambda run, at, node=node, visit=visit, output=output: decide.complete_visit(
            run, at, visit_uuid=visit, node_id=node, output=output))
        previous = visit
    raise AssertionError("unreachable")


class RawClient:
    """A minimal HTTP/1.1 keep-alive client on one socket (little client time in the figures)."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.pending = b""

    def exchange(self, request: bytes) -> tuple[int, dict[bytes, bytes], bytes]:
        """Send one request; (status, lower-cased headers, body) of its answer."""
        self.sock.sendall(request)
        while b"\r\n\r\n" not in self.pending:
            self.pending += self._recv()
        head, _, rest = self.pending.partition(b"\r\n\r\n")
        status_line, *lines = head.split(b"\r\n")
        headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(b":") for line in lines)}
        length = int(headers[b"content-length"])
        while len(rest) < length:
            rest += self._recv()
        self.pending = rest[length:]
        return int(status_line.split()[1]), headers, rest[:length]

    def _recv(self) -> bytes:
        data = self.sock.recv(1 << 16)
        if not data:
            raise ConnectionError("the server closed the connection")
        return data

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()


def http_request(path: str, token: str, payload: bytes) -> bytes:
    """The bytes of one POST."""
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"X-Context-Token: {token}\r\nContent-Length: {len(payload)}\r\n\r\n")
    return head.encode() + payload


def measure(port: int, askers: list[tuple[str, str]], requests: int, warmup: int,
            source: str) -> dict[str, tuple[list[float], bytes]]:
    """In a thread: time each query `requests` times after `warmup`, taking the (token, run) askers in turn."""
    client = RawClient(port)
    results: dict[str, tuple[list[float], bytes]] = {}
    try:
        for name, (path, fields) in QUERIES.items():
            asks = [http_request(path, token, json.dumps({"runId": run, **fields}).encode()) for token, run in askers]
            times: list[float] = []
            body = b""
            for n in range(warmup + requests):
                started = time.perf_counter()
                status, headers, body = client.exchange(asks[n % len(asks)])
                elapsed = time.perf_counter() - started
                if status != 200 or headers.get(b"x-context-source") != source.encode():
                    raise RuntimeError(f"{name}: {status} from {headers.get(b'x-context-source')!r}")
                if n >= warmup:
                    times.append(elapsed)
            results[name] = (times, body)
    finally:
        client.close()
    return results


def cold_folds(app: Litestar) -> ColdIndexes:
    """The context controller's cold folds (so the bench can make every read fold the whole log)."""
    for route in app.routes:
        for handler in getattr(route, "route_handlers", ()):
            controller = getattr(handler.fn, "__self__", None)
            if isinstance(controller, ContextQueryController):
                return controller.cold
    raise LookupError("the app serves no context query controller")


async def bench_store(fleet: Fleet, kind: str, requests: int, warmup: int, first_reads: int) -> list[dict[str, Any]]:
    """Serve one store; measure from memory, from the store (caught up), and first reads from the store (full fold)."""
    store = fleet.store(kind)
    settings = replace(Settings(), port=free_port(), data_dir=fleet.workdir / f"data-{kind}",
                       store=StoreSettings(database_url=store.url), load_demos=False)
    services = build_services(settings, encode_frame=encode_frame)
    app = create_app(services)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=settings.port, log_level="warning",
                                           lifespan="on"))
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        run_id, asker = await build_run(services)

        async def timed(ids: list[uuid.UUID], count: int, source: str) -> dict[str, tuple[list[float], bytes]]:
            askers = [(services.tokens.issue(i, asker), i.hex) for i in ids]
            gc.collect()
            try:
                return await asyncio.to_thread(measure, settings.port, askers, count, warmup, source)
            finally:
                for i in ids:
                    services.tokens.invalidate_visit(i, asker)

        figures = {"memory": await timed([run_id], requests, "memory")}
        await services.runs.release(run_id)
        services.hub.runs.pop(run_id)
        figures["store"] = await timed([run_id], requests, "store")
        cold_folds(app).max_runs = 0
        figures["store, first read"] = await timed([run_id], first_reads, "store")
    finally:
        server.should_exit = True
        await serving
    rows = []
    for name in QUERIES:
        for source, measured in figures.items():
            times, body = measured[name]
            baseline = BASELINES_MS[(name, "memory" if source == "memory" else "store")]
            p99 = ms(percentile(times, 99))
            rows.append({
                "store": kind, "query": name, "from": source, "n": len(times), "bytes": len(body),
                "p50 ms": ms(percentile(times, 50)), "p99 ms": p99, "§6 p99 ms": baseline,
                "target ms": baseline / 5, "verdict": verdict(p99, baseline / 5, at_least=False),
                "same body": body == figures["memory"][name][1],
            })
    return rows


async def run(*, kinds: list[str], requests: int, warmup: int, first_reads: int) -> None:
    """Every store, one after the other; one table."""
    rows: list[dict[str, Any]] = []
    async with Fleet("context") as fleet:
        for kind in kinds:
            rows += await bench_store(fleet, kind, requests, warmup, first_reads)
    print_table(f"context query latency over HTTP on loopback ({requests} requests each, one at a time)", rows)


def _args(parser: Any) -> None:
    parser.add_argument("--requests", type=int, default=2000, help="timed requests per query and source")
    parser.add_argument("--warmup", type=int, default=200, help="untimed requests before them")
    parser.add_argument("--first-reads", type=int, default=500, help="timed first reads (full folds) per query")


if __name__ == "__main__":
    bench_main(run, _args, __doc__.splitlines()[0])
