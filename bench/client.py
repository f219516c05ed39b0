"""The client process of a bench (`python -m bench.client`): real SSE clients that record what arrives.

Its one command, `follow`, opens one stream per path at once (asyncio + httpx, or a bare
socket with a minimal HTTP/1.1 client), reads the raw bytes, splits them into frames and
records each step frame's id, arrival time and embedded append time (bench/frames.py).
"""

from __future__ import annotations

import asyncio
import time
from array import array
from collections.abc import Callable, Coroutine
from typing import Any

from bench.channel import serve_commands
from bench.cli import run_loop
from bench.frames import FrameReader, write_records
from bench.names import API_KEY

_CLIENTS: dict[tuple[str, str], Any] = {}


def _http_client(base_url: str, key: str) -> Any:
    """One httpx client per server, kept across commands (its set-up is not part of a measurement).

    Keep-alive is off: every stream opens a new TCP connection, as a reconnecting client does.
    """
    import httpx

    client = _CLIENTS.get((base_url, key))
    if client is None:
        client = httpx.AsyncClient(
            base_url=base_url,
            headers={"X-API-Key": key},
            timeout=httpx.Timeout(120.0, connect=10.0),
            limits=httpx.Limits(max_connections=512, max_keepalive_connections=0),
        )
        _CLIENTS[(base_url, key)] = client
    return client


async def _read_httpx(
    client: Any,
    path: str,
    headers: dict[str, str],
    reader: FrameReader,
    on_connected: Callable[[], None],
) -> dict[str, Any]:
    """Read one stream through httpx until it ends or reaches the reader's stop id."""
    clock = time.time
    t_req = clock()
    ended = True
    async with client.stream("GET", path, headers=headers) as response:
        t_headers = clock()
        if response.status_code != 200:
            body = await response.aread()
            raise RuntimeError(f"{path}: HTTP {response.status_code}: {body[:300]!r}")
        on_connected()
        async for chunk in response.aiter_raw():
            if reader.feed(chunk, clock()):
                ended = False
                break
    return reader.summary(t_req, t_headers, ended)


async def _read_raw(
    base_url: str,
    path: str,
    headers: dict[str, str],
    reader: FrameReader,
    on_connected: Callable[[], None],
) -> dict[str, Any]:
    """The same over a bare asyncio socket and a minimal HTTP/1.1 client (no client library cost)."""
    clock = time.time
    host, _, port = base_url.removeprefix("http://").partition(":")
    request = (
        f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
        + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        + "\r\n"
    )
    t_req = clock()
    stream_in, stream_out = await asyncio.open_connection(host, int(port))
    ended = True
    try:
        stream_out.write(request.encode())
        head = await stream_in.readuntil(b"\r\n\r\n")
        t_headers = clock()
        status = int(head.split(b" ", 2)[1])
        if status != 200:
            raise RuntimeError(
                f"{path}: HTTP {status}: {(head + await stream_in.read(300))!r}"
            )
        on_connected()
        chunked = b"transfer-encoding: chunked" in head.lower()
        while True:
            if not chunked:
                data = await stream_in.read(1 << 16)
                if not data:
                    break
                if reader.feed(data, clock()):
                    ended = False
                    break
                continue
            size = int((await stream_in.readline()).split(b";")[0], 16)
            if size == 0:
                break
            stop = False
            while size > 0:
                data = await stream_in.read(min(size, 1 << 16))
                if not data:
                    raise RuntimeError("connection closed inside a chunk")
                size -= len(data)
                stop = reader.feed(data, clock()) or stop
            await stream_in.readexactly(2)
            if stop:
                ended = False
                break
    finally:
        stream_out.close()
    return reader.summary(t_req, t_headers, ended)


async def follow(
    emit: Any,
    base_url: str,
    paths: list[str],
    last_event_id: int | None = None,
    stop_id: int | None = None,
    out: str | None = None,
    key: str = API_KEY,
    raw: bool = False,
) -> dict[str, Any]:
    """Read SSE streams (one client per path, concurrently) until each ends or reaches `stop_id`.

    Emits `connected` once every client has its response headers. Records per frame
    (client, id, arrival, t) into `out` when given. `raw` reads through a bare socket
    instead of httpx (to separate the server's latency from the client library's).
    """
    all_connected = asyncio.Event()
    connected = 0
    records: list[array] = [array("d") for _ in paths]
    headers = {"Accept": "text/event-stream", "X-API-Key": key}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)

    def on_connected() -> None:
        nonlocal connected
        connected += 1
        if connected == len(paths):
            all_connected.set()

    def one(idx: int, path: str) -> Coroutine[Any, Any, dict[str, Any]]:
        reader = FrameReader(idx, records[idx], stop_id)
        if raw:
            return _read_raw(base_url, path, headers, reader, on_connected)
        return _read_httpx(
            _http_client(base_url, key), path, headers, reader, on_connected
        )

    tasks = [asyncio.create_task(one(i, p)) for i, p in enumerate(paths)]
    everything = asyncio.gather(*tasks)
    waiter = asyncio.create_task(all_connected.wait())
    first: list[asyncio.Future[Any]] = [everything, waiter]
    await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
    failure = everything.exception() if everything.done() else None
    if failure is not None:
        waiter.cancel()
        raise failure
    emit("connected")
    results = await everything
    waiter.cancel()
    if out:
        write_records(out, records)
    return {"clients": results}


async def client_main() -> None:
    """Serve `follow` commands on stdin/stdout until told to quit."""
    await serve_commands({"follow": follow}, {})


if __name__ == "__main__":
    run_loop(client_main())
