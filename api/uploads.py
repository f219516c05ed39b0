"""The run-creation body: JSON, or multipart with a `payload` part and `files` parts streamed to disk.

Multipart bodies are parsed as they arrive (never buffered whole): each file goes straight
into the new run's workspace directory while its size is counted and its content hashed.
Any refusal (a file or the request over its limit, an unsafe path, a malformed part)
stops reading at once; the caller then removes the directory, so nothing is left behind.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from litestar import Request
from litestar.exceptions import InternalServerException
from multipart import MultipartError, MultipartSegment, ParserLimitReached, PushMultipartParser

from api.errors import ApiError, validation_failed
from api.jsonbody import decode_json
from api.schemas import CreateRunRequest
from engine.settings import UploadSettings
from engine.workspace.directory import safe_relative

MAX_PAYLOAD_BYTES = 1024 * 1024
"""The JSON request (the body, or the `payload` part) may be at most 1 MiB."""
MAX_FILES = 1000
"""Files one run-creation request may upload."""
WRITE_BATCH_BYTES = 1024 * 1024
"""File data is written to disk in batches of this size (off the event loop)."""
RESERVED_VARIABLE = "uploadedFiles"


def payload_too_large(message: str) -> ApiError:
    """413 PAYLOAD_TOO_LARGE with a readable message."""
    return ApiError("PAYLOAD_TOO_LARGE", message)


@dataclass(frozen=True)
class UploadedFile:
    """One stored upload: its normalised relative path, size and sha256."""

    path: str
    size: int
    sha256: str


@dataclass
class CreateBody:
    """What a run-creation request asked for."""

    request: CreateRunRequest
    files: list[UploadedFile] = field(default_factory=list)

    def normalised(self, workflow_name: str) -> dict[str, Any]:
        """The request with defaults applied, for the idempotency digest."""
        return {
            "workflow": workflow_name,
            "variables": self.request.variables,
            "async": self.request.run_async,
            "ttlHours": self.request.ttl_hours,
            "files": [[f.path, f.size, f.sha256] for f in self.files],
            **({"webhook": self.request.webhook} if self.request.webhook is not None else {}),
        }


def decode_payload(raw: bytes) -> CreateRunRequest:
    """The JSON request; an empty body means every default."""
    if not raw.strip():
        return CreateRunRequest()
    request = decode_json(raw, CreateRunRequest)
    if RESERVED_VARIABLE in request.variables:
        raise validation_failed(
            f"variables.{RESERVED_VARIABLE} is set by the service from the uploaded files; do not send it"
        )
    return request


async def body_chunks(request: Request[Any, Any, Any], limit: int, what: str) -> AsyncIterator[bytes]:
    """The request body as it arrives; 413 as soon as it exceeds `limit` bytes."""
    announced = (request.headers.get("content-length") or "").strip()
    if announced.isascii() and announced.isdigit() and (len(announced) > 19 or int(announced) > limit):
        raise payload_too_large(f"{what} is {announced[:32]} bytes; at most {limit} bytes are accepted")
    received = 0
    try:
        async for chunk in request.stream():
            received += len(chunk)
            if received > limit:
                raise payload_too_large(f"{what} is over {limit} bytes; at most {limit} bytes are accepted")
            yield chunk
    except InternalServerException:
        raise validation_failed("the request body ended before it was complete") from None


async def drain(chunks: AsyncIterator[bytes]) -> None:
    """Read and drop the rest of a refused body (up to the request limit) so the client reads the answer."""
    try:
        async for _ in chunks:
            pass
    except ApiError:
        pass


async def read_json_body(request: Request[Any, Any, Any], limit: int = MAX_PAYLOAD_BYTES) -> bytes:
    """The whole (small) JSON body, at most `limit` bytes."""
    parts = [chunk async for chunk in body_chunks(request, limit, "the JSON body")]
    return b"".join(parts)


def media_type(request: Request[Any, Any, Any]) -> tuple[str, dict[str, str]]:
    """The request's content type (lower case) and its options."""
    content_type, options = request.content_type
    return content_type.lower().strip(), options


async def read_create_body(
    request: Request[Any, Any, Any], run_dir: Path, limits: UploadSettings
) -> CreateBody:
    """Parse a JSON or multipart run-creation request; files land under `run_dir`."""
    kind, options = media_type(request)
    if kind in ("", "application/json") or kind.endswith("+json"):
        return CreateBody(decode_payload(await read_json_body(request)))
    if kind == "multipart/form-data":
        boundary = options.get("boundary")
        if not boundary:
            raise validation_failed("multipart/form-data needs a boundary in Content-Type")
        reader = MultipartReader(run_dir, limits)
        return await reader.read(body_chunks(request, limits.max_request_bytes, "the request"), boundary)
    raise ApiError("UNSUPPORTED_MEDIA_TYPE", f"send application/json or multipart/form-data, not {kind!r}")


class MultipartReader:
    """Reads `payload` and `files` parts; writes each file as it streams in."""

    def __init__(self, run_dir: Path, limits: UploadSettings) -> None:
        self.run_dir = run_dir
        self.limits = limits
        self.payload: bytearray | None = None
        self.files: list[UploadedFile] = []
        self._paths: set[str] = set()
        self._dirs: set[str] = set()
        self._part: str | None = None
        self._file: _FileSink | None = None

    async def read(self, chunks: AsyncIterator[bytes], boundary: str) -> CreateBody:
        """Consume the body; the parsed request and the stored files."""
        try:
            with PushMultipartParser(boundary, max_header_count=16, max_segment_count=MAX_FILES + 1) as parser:
                async for chunk in chunks:
                    for event in parser.parse(chunk):
                        await self._on(event)
        except ParserLimitReached as exc:
            raise payload_too_large(f"multipart limit reached: {exc}") from None
        except MultipartError as exc:
            raise validation_failed(f"malformed multipart body: {exc}") from None
        except ApiError as exc:
            if exc.status == 413:
                await drain(chunks)
            raise
        finally:
            if self._file is not None:
                await self._file.abort()
        request = decode_payload(bytes(self.payload or b""))
        if self.files:
            request.variables[RESERVED_VARIABLE] = [f.path for f in self.files]
        return CreateBody(request, self.files)

    async def _on(self, event: MultipartSegment | bytes | None) -> None:
        if isinstance(event, MultipartSegment):
            await self._begin(event)
        elif event is None:
            await self._end()
        elif self._part == "payload":
            assert self.payload is not None
            if len(self.payload) + len(event) > MAX_PAYLOAD_BYTES:
                raise payload_too_large(f"the payload part is over {MAX_PAYLOAD_BYTES} bytes")
            self.payload += event
        else:
            assert self._file is not None
            await self._file.write(event)

    async def _begin(self, segment: MultipartSegment) -> None:
        self._part = segment.name
        if segment.name == "payload":
            if self.payload is not None:
                raise validation_failed("the multipart body has more than one 'payload' part")
            self.payload = bytearray()
        elif segment.name == "files":
            path = self._claim_path(segment)
            self._file = await _FileSink.open(self.run_dir, path, self.limits.max_file_bytes)
        else:
            raise validation_failed(
                f"unexpected multipart part {str(segment.name)[:64]!r}; send one 'payload' part and 'files' parts"
            )

    async def _end(self) -> None:
        if self._part == "files" and self._file is not None:
            self.files.append(await self._file.close())
            self._file = None
        self._part = None

    def _claim_path(self, segment: MultipartSegment) -> str:
        raw = segment.header("X-Relative-Path")
        filename = segment.filename or ""
        if raw is not None and raw.strip().endswith(("/", "\\")):
            raw = raw.strip() + filename
        raw = raw if raw is not None else filename
        if not raw.strip():
            raise validation_failed("each 'files' part needs a filename or an X-Relative-Path header")
        path = safe_relative(raw)
        parents = ["/".join(path.split("/")[:i]) for i in range(1, path.count("/") + 1)]
        if path in self._paths or path in self._dirs or any(p in self._paths for p in parents):
            raise validation_failed(f"uploaded path {path!r} is used twice or clashes with another file's directory")
        self._paths.add(path)
        self._dirs.update(parents)
        return path


class _FileSink:
    """One uploaded file being written: counted, hashed, flushed in batches off the event loop."""

    def __init__(self, path: str, target: Path, handle: BinaryIO, limit: int) -> None:
        self.path, self.target, self.handle, self.limit = path, target, handle, limit
        self.size = 0
        self.digest = hashlib.sha256()
        self.pending = bytearray()

    @classmethod
    async def open(cls, run_dir: Path, path: str, limit: int) -> _FileSink:
        """Create the file (and its directories) under the run's directory."""
        target = run_dir / path

        def create() -> BinaryIO:
            target.parent.mkdir(parents=True, exist_ok=True)
            return target.open("xb")

        return cls(path, target, await asyncio.to_thread(create), limit)

    async def write(self, data: bytes) -> None:
        """Append a piece; 413 as soon as the file is over its limit."""
        self.size += len(data)
        if self.size > self.limit:
            raise payload_too_large(
                f"file {self.path!r} is over {self.limit} bytes; each file may be at most {self.limit} bytes"
            )
        self.digest.update(data)
        self.pending += data
        if len(self.pending) >= WRITE_BATCH_BYTES:
            await self._flush()

    async def _flush(self) -> None:
        data, self.pending = bytes(self.pending), bytearray()
        await asyncio.to_thread(self.handle.write, data)

    async def close(self) -> UploadedFile:
        """Write what is left and close; the stored file's description."""
        await self._flush()
        await asyncio.to_thread(self.handle.close)
        return UploadedFile(self.path, self.size, self.digest.hexdigest())

    async def abort(self) -> None:
        """Close without caring about the content (the directory is removed next)."""
        await asyncio.to_thread(self.handle.close)
