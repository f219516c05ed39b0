"""Raw requests for the head and body limit tests (and bench/heads.py): heads of an exact size, sent over bare
sockets, and the answers read back until the server closes."""

from __future__ import annotations

import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

FILLER_LINE = 8000
"""Bytes of one filler header line (`X-Fill-N: aaa...`), well under any line limit."""


def head(path: str = "/healthz", lines: tuple[bytes, ...] = (), *, end: bool = True) -> bytes:
    """A GET head with these extra header lines (`end=False`: without its blank line, so it is never complete)."""
    extra = b"".join(line + b"\r\n" for line in lines)
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode() + extra + (b"\r\n" if end else b"")


def header_line(name: str, size: int) -> bytes:
    """`Name: aaa...` of exactly `size` bytes (without its line end)."""
    prefix = f"{name}: ".encode()
    return prefix + b"a" * (size - len(prefix))


def head_of_size(size: int, path: str = "/healthz") -> bytes:
    """A complete GET head of exactly `size` bytes, padded with filler header lines."""
    lines: list[bytes] = []
    while len(head(path, tuple(lines))) + FILLER_LINE + 2 < size:
        lines.append(header_line(f"X-Fill-{len(lines)}", FILLER_LINE))
    missing = size - len(head(path, tuple(lines))) - 2
    lines.append(header_line("X-Last", missing))
    built = head(path, tuple(lines))
    assert len(built) == size, (len(built), size)
    return built


def target_of_size(size: int, path: str = "/healthz") -> str:
    """A request target of exactly `size` bytes: `path?pad=aaa...`."""
    prefix = f"{path}?pad="
    return prefix + "a" * (size - len(prefix))


@dataclass
class Answer:
    """One HTTP response read off a bare socket."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body as JSON."""
        return json.loads(self.body)


@dataclass
class Exchange:
    """What a bare connection got: its answers in order, and whether the server closed it."""

    answers: list[Answer] = field(default_factory=list)
    closed: bool = False


def send(sock: socket.socket, data: bytes, piece: int | None, pause: float) -> None:
    """Send `data` (in pieces of `piece` bytes with `pause` between); a server that closed early is no error."""
    step = piece or len(data) or 1
    try:
        for start in range(0, len(data), step):
            sock.sendall(data[start:start + step])
            if pause:
                time.sleep(pause)
    except OSError:
        pass


def exchange(port: int, data: bytes, *, piece: int | None = None, pause: float = 0.0, answers: int | None = None,
             within: float = 10.0) -> Exchange:
    """Send `data` on a new loopback connection, then read until the server closes it (or `answers` answers came,
    or `within` seconds passed)."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        send(sock, data, piece, pause)
        return read_answers(sock, answers, within)


def read_answers(sock: socket.socket, answers: int | None, within: float) -> Exchange:
    """Read answers off `sock` until it closes, `answers` came or `within` seconds passed."""
    got = Exchange()
    raw = b""
    deadline = time.monotonic() + within
    while answers is None or len(got.answers) < answers:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock.settimeout(left)
        try:
            data = sock.recv(1 << 16)
        except TimeoutError:
            break
        except OSError:
            data = b""
        if not data:
            got.closed = True
            break
        raw += data
        raw = take_answers(raw, got.answers)
    return got


def take_answers(raw: bytes, into: list[Answer]) -> bytes:
    """Move every whole response (with a Content-Length) at the start of `raw` into `into`; the rest."""
    while b"\r\n\r\n" in raw:
        top, rest = raw.split(b"\r\n\r\n", 1)
        status_line, *lines = top.decode("latin-1").split("\r\n")
        headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
        length = int(headers.get("content-length", "0"))
        if len(rest) < length:
            break
        into.append(Answer(int(status_line.split()[1]), headers, rest[:length]))
        raw = rest[length:]
    return raw


def oversized_heads(port: int, count: int, value_bytes: int) -> list[Exchange]:
    """`count` connections at once, each sending a head with one header value of `value_bytes` bytes."""
    data = head(lines=(header_line("X-Big", value_bytes),))
    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(lambda _: exchange(port, data), range(count)))


def trickle(port: int, data: bytes, *, pace: float, within: float = 10.0) -> Exchange:
    """Send `data` (a head and the start of its body), then one more byte every `pace` seconds until the server
    closes the connection; read its answers meanwhile."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        send(sock, data, None, 0.0)
        stop = threading.Event()

        def drip() -> None:
            while not stop.wait(pace):
                try:
                    sock.sendall(b" ")
                except OSError:
                    return

        dripping = threading.Thread(target=drip, daemon=True)
        dripping.start()
        try:
            return read_answers(sock, None, within)
        finally:
            stop.set()
            dripping.join()
