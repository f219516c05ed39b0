"""Request heads counted as their bytes arrive, against the limits of the `limits` settings group (decision 35).

The parser (httptools) keeps a header line it has not seen the end of in a buffer of its own,
so a head is measured in two ways: the protocol counts the raw bytes it feeds while the head is
open (`HeadCount.fed`, and it never feeds more than the head may still take), and the parser's
callbacks count the request target and each finished header line (`HeadCount.url`,
`HeadCount.header`). A refusal is an `ApiError` (`431 HEADERS_TOO_LARGE` or `414 URI_TOO_LONG`)
that the protocol answers itself, before the app sees the request.
"""

from __future__ import annotations

import msgspec
from uvicorn.protocols.http.httptools_impl import STATUS_LINE

from api.errors import ApiError
from api.paths import is_context_path
from api.schemas import ErrorEnvelope
from engine.context.contract import ContextAnswer
from engine.limits import LimitSettings

REQUEST_LINE_FRAME = len(b"  HTTP/1.1\r\n")
"""What a request line adds to its method and target."""
HEADER_LINE_FRAME = len(b":\r\n")
"""The least a header line adds to its name and value."""
TARGET_START_BYTES = 256
"""How much of a request target a head keeps to tell the API it addresses."""


def head_too_large(message: str) -> ApiError:
    """431 HEADERS_TOO_LARGE."""
    return ApiError("HEADERS_TOO_LARGE", message)


class HeadCount:
    """One request head being read: its bytes so far, its target's length, its header lines."""

    __slots__ = ("limits", "received", "exact", "url_bytes", "target_start", "lines", "line_bytes")

    def __init__(self, limits: LimitSettings) -> None:
        self.limits = limits
        self.received = 0
        """Bytes of the head fed to the parser so far (never more than the head has)."""
        self.exact = True
        """False when the head began after another request in one read, at an offset the parser does not tell."""
        self.url_bytes = 0
        self.target_start = b""
        """The first bytes of the request target: enough to tell which API's envelope a refusal answers in."""
        self.lines = 0
        self.line_bytes = 0
        """Bytes of the finished header lines, counted the least they can be (`Name:value`)."""

    def budget(self) -> int:
        """How many more bytes may be fed while this head is open: one past them proves it too large."""
        return max(1, self.limits.max_head_bytes - self.received)

    def fed(self, size: int, *, from_start: bool) -> None:
        """`size` more bytes of this head were fed (`from_start`: they are all of it so far); 431 once it has
        taken the most a head may have and is still open."""
        if from_start:
            self.received = size
        else:
            self.received += size
        if self.received >= self.limits.max_head_bytes:
            raise self._over()

    def path(self) -> str:
        """The path the request target begins with (all of it, or its first bytes when it is long)."""
        return self.target_start.split(b"?", 1)[0].decode("latin-1")

    def began_inside(self) -> None:
        """The head began after another request in the same read: count it by what the callbacks saw."""
        self.exact = False
        self.received = max(self.received, self.url_bytes + self.line_bytes)
        self.fed(0, from_start=False)

    def url(self, piece: bytes) -> None:
        """A piece of the request target arrived; 414 past FLOWTRAIL_MAX_URL_BYTES."""
        if len(self.target_start) < TARGET_START_BYTES:
            self.target_start += piece[:TARGET_START_BYTES - len(self.target_start)]
        self.url_bytes += len(piece)
        if self.url_bytes > self.limits.max_url_bytes:
            raise ApiError("URI_TOO_LONG", f"the request target is over {self.limits.max_url_bytes} bytes "
                                           "(FLOWTRAIL_MAX_URL_BYTES)")

    def header(self, name: bytes, value: bytes) -> None:
        """A header line is finished; 431 past FLOWTRAIL_MAX_HEADERS lines or FLOWTRAIL_MAX_HEADER_LINE_BYTES."""
        self.lines += 1
        if self.lines > self.limits.max_headers:
            raise head_too_large(f"the request has more than {self.limits.max_headers} header lines "
                                 "(FLOWTRAIL_MAX_HEADERS)")
        size = len(name) + len(value) + len(b": ")
        if size > self.limits.max_header_line_bytes:
            raise head_too_large(f"a header line ({name[:64].decode('latin-1')}) is over "
                                 f"{self.limits.max_header_line_bytes} bytes (FLOWTRAIL_MAX_HEADER_LINE_BYTES)")
        self.line_bytes += len(name) + len(value) + HEADER_LINE_FRAME

    def complete(self, method: bytes) -> None:
        """The head ended; one that began inside a read is checked by the least it can have been."""
        if not self.exact and self.least_size(method) > self.limits.max_head_bytes:
            raise self._over()

    def least_size(self, method: bytes) -> int:
        """The fewest bytes a whole head with what the callbacks saw can have."""
        return len(method) + self.url_bytes + REQUEST_LINE_FRAME + self.line_bytes + len(b"\r\n")

    def _over(self) -> ApiError:
        return head_too_large(f"the request head is over {self.limits.max_head_bytes} bytes (FLOWTRAIL_MAX_HEAD_BYTES)")


def refusal(error: ApiError, path: str, default_headers: list[tuple[bytes, bytes]]) -> bytes:
    """The whole HTTP response of a refusal the server makes itself: the documented envelope (the context API's
    own for its paths), `Connection: close`."""
    status = error.status
    if is_context_path(path):
        body = msgspec.json.encode(ContextAnswer(status, error.message))
    else:
        body = msgspec.json.encode(ErrorEnvelope(error.code, error.message))
    head = [STATUS_LINE[status]]
    for name, value in default_headers:
        head += [name, b": ", value, b"\r\n"]
    head += [
        b"content-type: application/json\r\n",
        b"content-length: ", str(len(body)).encode(), b"\r\n",
        b"cache-control: no-store\r\n",
        b"connection: close\r\n\r\n",
    ]
    return b"".join(head) + body
