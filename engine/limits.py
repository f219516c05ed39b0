"""What one API key and one connection may hold or ask of the service: the `FLOWTRAIL_MAX_*`, rate, timeout and
body settings (read with the rest by engine.settings)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from engine.config import setting


@dataclass(frozen=True)
class LimitSettings:
    """What one API key, and one connection, may hold or ask of the service."""

    max_streams_per_key: Annotated[int, setting(
        "FLOWTRAIL_MAX_STREAMS_PER_KEY", "open SSE streams one API key may hold; one more is answered "
        "`429 TOO_MANY_STREAMS`", ge=1,
    )] = 500
    rate_limit_per_key: Annotated[float, setting(
        "FLOWTRAIL_RATE_LIMIT_PER_KEY", "requests per second one API key may make on average (0: no limit); beyond "
        "it `429 RATE_LIMITED` with `Retry-After`", ge=0,
    )] = 0.0
    rate_limit_burst: Annotated[int, setting(
        "FLOWTRAIL_RATE_LIMIT_BURST", "requests one API key may make at once above its rate (the bucket's size)", ge=1,
    )] = 100
    idle_timeout_seconds: Annotated[float, setting(
        "FLOWTRAIL_IDLE_TIMEOUT_SECONDS", "a kept-alive HTTP connection with no new request this long after its last "
        "response is closed", gt=0,
    )] = 5.0
    header_timeout_seconds: Annotated[float, setting(
        "FLOWTRAIL_HEADER_TIMEOUT_SECONDS", "a connection that has not sent a whole request head (request line and "
        "headers) this long after it opened or after its last response is closed", gt=0,
    )] = 10.0
    max_head_bytes: Annotated[int, setting(
        "FLOWTRAIL_MAX_HEAD_BYTES", "largest request head (request line, headers and the blank line), in bytes; "
        "beyond it `431 HEADERS_TOO_LARGE`, refused as it arrives", ge=1024,
    )] = 64 * 1024
    max_header_line_bytes: Annotated[int, setting(
        "FLOWTRAIL_MAX_HEADER_LINE_BYTES", "largest header line (`Name: value`), in bytes; beyond it "
        "`431 HEADERS_TOO_LARGE`", ge=256,
    )] = 16 * 1024
    max_headers: Annotated[int, setting(
        "FLOWTRAIL_MAX_HEADERS", "most header lines in a request head; one more is `431 HEADERS_TOO_LARGE`", ge=8,
    )] = 100
    max_url_bytes: Annotated[int, setting(
        "FLOWTRAIL_MAX_URL_BYTES", "longest request target (path and query), in bytes; beyond it `414 URI_TOO_LONG`",
        ge=256,
    )] = 8 * 1024
    body_timeout_seconds: Annotated[float, setting(
        "FLOWTRAIL_BODY_TIMEOUT_SECONDS", "a request body has this long to arrive, plus a second for every "
        "FLOWTRAIL_BODY_MIN_BYTES_PER_SECOND bytes received; later, `408 REQUEST_TIMEOUT` and nothing is stored",
        gt=0,
    )] = 30.0
    body_min_bytes_per_second: Annotated[int, setting(
        "FLOWTRAIL_BODY_MIN_BYTES_PER_SECOND", "the slowest average rate a long request body may arrive at (0: the "
        "whole body within FLOWTRAIL_BODY_TIMEOUT_SECONDS)", ge=0,
    )] = 16 * 1024
