"""Clients and servers for the pressure tests: a server with flowtrail's connection guards, bare-socket SSE
readers (fast, slow or stuck), request latencies and the resources a server process holds."""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx


def request_head(path: str, key: str = "test-key-all", *, last_event_id: int | None = None) -> bytes:
    """The bytes of a GET with an API key."""
    resume = f"Last-Event-ID: {last_event_id}\r\n" if last_event_id is not None else ""
    return (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-API-Key: {key}\r\nAccept: text/event-stream\r\n"
            f"{resume}\r\n").encode()


async def connect(port: int, *, receive_buffer: int | None = None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A loopback connection; `receive_buffer` shrinks the socket's receive buffer (a stuck client then fills sooner)."""
    sock = socket.socket()
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    return await asyncio.open_connection(sock=sock)


@dataclass
class RawStream:
    """One SSE connection read over a bare socket: the ids and their arrival times, the status, the end."""

    ids: list[int] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)
    status: int = 0
    ended: bool = False
    """True when the response ended properly (the last chunk of a chunked body)."""
    cut: bool = False
    """True when the server closed the connection before the response ended."""
    writer: asyncio.StreamWriter | None = None

    async def read(self, port: int, head: bytes, *, pace: tuple[int, float] | None = None,
                   until_id: int | None = None, receive_buffer: int | None = None,
                   hurry: asyncio.Event | None = None) -> RawStream:
        """Send `head` and read until the response ends or the connection closes; `pace` = (bytes, seconds) reads
        that many bytes at a time with that pause in between (until `hurry` is set); `until_id` stops (leaving the
        connection open) once that id arrived."""
        reader, self.writer = await connect(port, receive_buffer=receive_buffer)
        self.writer.write(head)
        rest = b""
        size, pause = pace if pace is not None else (1 << 20, 0.0)
        while True:
            try:
                data = await reader.read(size)
            except ConnectionError:
                data = b""
            if not data:
                self.cut = not self.ended
                return self
            lines = (rest + data).split(b"\n")
            rest = lines.pop()
            now = time.monotonic()
            for line in lines:
                if line.startswith(b"id: "):
                    self.ids.append(int(line[4:]))
                    self.arrivals.append(now)
                elif line.startswith(b"HTTP/1.1 "):
                    self.status = int(line[9:12])
                elif line == b"0\r" and not rest:
                    self.ended = True
            if self.status and self.status != 200:
                return self
            if until_id is not None and self.ids and self.ids[-1] >= until_id:
                return self
            if hurry is not None and hurry.is_set():
                size, pause = 1 << 20, 0.0
            if pause:
                await asyncio.sleep(pause)

    def close(self) -> None:
        """Drop the connection."""
        if self.writer is not None:
            self.writer.transport.abort()


def stuck_stream(port: int, head: bytes) -> socket.socket:
    """A connection that sends `head` and then reads nothing (its receive buffer small, so it fills soon)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(head)
    return sock


def closed_by_server(sock: socket.socket, within: float) -> bool:
    """True when the server closed or cut this connection within `within` seconds (what it sent is skipped)."""
    deadline = time.monotonic() + within
    try:
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            if not sock.recv(1 << 20):
                return True
    except TimeoutError:
        return False
    except ConnectionError:
        return True
    return False


def percentiles(samples: list[float]) -> tuple[float, float]:
    """(p50, p99) in milliseconds."""
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered) * 1000, p99 * 1000


async def latencies(client: httpx.AsyncClient, path: str, count: int, *, pause: float = 0.01) -> list[float]:
    """Seconds each of `count` GETs of `path` took (one at a time); every answer must be 200."""
    took = []
    for _ in range(count):
        start = time.perf_counter()
        response = await client.get(path)
        took.append(time.perf_counter() - start)
        assert response.status_code == 200, response.text
        await asyncio.sleep(pause)
    return took


def rss_mib(pid: int | None = None) -> float:
    """Resident memory of a process (default: this one), MiB."""
    for line in Path(f"/proc/{pid or os.getpid()}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def open_fds(pid: int) -> int:
    """How many file descriptors a process holds."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def postgres_connections(pid: int, port: int = 5432) -> int:
    """How many TCP connections a process holds to PostgreSQL on loopback `port`."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("tcp", "tcp6"):
        for row in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            cols = row.split()
            if int(cols[2].rsplit(":", 1)[1], 16) == port and cols[3] == "01" and cols[9] in inodes:
                count += 1
    return count
