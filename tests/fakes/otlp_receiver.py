"""A fake OTLP/HTTP trace receiver on 127.0.0.1: `POST /v1/traces` with a protobuf `ExportTraceServiceRequest`,
decoded with opentelemetry-proto, the spans kept for the test to read."""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from tests.fakes.loopback import LoopbackServer

PROTOBUF = "application/x-protobuf"
KINDS = {Span.SPAN_KIND_INTERNAL: "INTERNAL", Span.SPAN_KIND_SERVER: "SERVER", Span.SPAN_KIND_CLIENT: "CLIENT",
         Span.SPAN_KIND_PRODUCER: "PRODUCER", Span.SPAN_KIND_CONSUMER: "CONSUMER"}
STATUSES = {Status.STATUS_CODE_UNSET: "UNSET", Status.STATUS_CODE_OK: "OK", Status.STATUS_CODE_ERROR: "ERROR"}


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span: ids in hex, its name, kind, attributes, status and its resource's attributes."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: str
    attributes: dict[str, Any]
    status: str
    resource: dict[str, Any]

    @property
    def is_root(self) -> bool:
        """True when the span names no parent."""
        return not self.parent_span_id


def value_of(value: AnyValue) -> Any:
    """An attribute's value as Python (arrays as tuples)."""
    which = value.WhichOneof("value")
    if which == "array_value":
        return tuple(value_of(item) for item in value.array_value.values)
    return getattr(value, which) if which else None


def attributes_of(pairs: list[KeyValue] | Any) -> dict[str, Any]:
    """Key-value pairs as a dict."""
    return {pair.key: value_of(pair.value) for pair in pairs}


def decoded(body: bytes) -> list[ReceivedSpan]:
    """Every span of one export request."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    return [
        ReceivedSpan(
            trace_id=span.trace_id.hex(), span_id=span.span_id.hex(), parent_span_id=span.parent_span_id.hex(),
            name=span.name, kind=KINDS.get(span.kind, "UNSPECIFIED"), attributes=attributes_of(span.attributes),
            status=STATUSES[span.status.code], resource=attributes_of(resource_spans.resource.attributes),
        )
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    ]


class OtlpReceiver(LoopbackServer):
    """Answers `POST /v1/traces` with 200 and an empty `ExportTraceServiceResponse`; keeps every span it got."""

    def __init__(self) -> None:
        super().__init__()
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._arrived = asyncio.Event()

    @property
    def endpoint(self) -> str:
        """What OTEL_EXPORTER_OTLP_ENDPOINT is set to (the exporter adds `/v1/traces`)."""
        return f"http://127.0.0.1:{self.port}"

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer each request of a kept-alive connection."""
        while not reader.at_eof():
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                return
            request_line, *lines = head.decode("latin-1").split("\r\n")
            method, path, _ = request_line.split(" ", 2)
            headers = {name.strip().lower(): value.strip()
                       for name, _, value in (line.partition(":") for line in lines if line)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            if method != "POST" or path != "/v1/traces" or headers.get("content-type") != PROTOBUF:
                await _answer(writer, 404, b"")
                continue
            self.requests += 1
            self.spans.extend(decoded(_inflated(body, headers.get("content-encoding", ""))))
            self._arrived.set()
            await _answer(writer, 200, ExportTraceServiceResponse().SerializeToString())

    async def wait_for(self, found: Callable[[list[ReceivedSpan]], bool], timeout: float = 30.0) -> list[ReceivedSpan]:
        """The spans received once `found(spans)` holds (AssertionError after `timeout` seconds)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not found(self.spans):
            left = deadline - loop.time()
            if left <= 0:
                names = sorted({span.name for span in self.spans})
                raise AssertionError(f"the spans wanted did not arrive within {timeout:g} s; got {names}")
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), min(left, 0.5))
            except TimeoutError:
                pass
        return list(self.spans)


def _inflated(body: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    return body


async def _answer(writer: asyncio.StreamWriter, status: int, body: bytes) -> None:
    reason = "OK" if status == 200 else "Not Found"
    writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: {PROTOBUF}\r\n"
                 f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    await writer.drain()
