"""The streaming multipart reader: however the body is cut into chunks, the same files and payload come out."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.errors import ApiError
from api.uploads import MultipartReader
from engine.settings import UploadSettings

BOUNDARY = "----flowtrail-test"
LIMITS = UploadSettings(max_file_bytes=4096, max_request_bytes=1 << 20)


def part(headers: list[str], content: bytes) -> bytes:
    return (f"--{BOUNDARY}\r\n" + "".join(h + "\r\n" for h in headers) + "\r\n").encode() + content + b"\r\n"


def body(*parts: bytes) -> bytes:
    return b"".join(parts) + f"--{BOUNDARY}--\r\n".encode()


PAYLOAD = part(['Content-Disposition: form-data; name="payload"', "Content-Type: application/json"],
               '{"variables": {"topic": "汇总"}, "ttlHours": 24}'.encode())
REPORT = part(['Content-Disposition: form-data; name="files"; filename="report.md"'], b"# r\r\n--not-a-boundary")
NESTED = part(['Content-Disposition: form-data; name="files"; filename="data.csv"', "X-Relative-Path: inputs/2024/data.csv"],
              bytes(range(256)) * 4)
EMPTY = part(['Content-Disposition: form-data; name="files"; filename="empty.txt"'], b"")
WHOLE = body(PAYLOAD, REPORT, NESTED, EMPTY)


async def chunked(data: bytes, cuts: list[int]):
    start = 0
    for cut in sorted(set(cuts)):
        yield data[start:cut]
        start = cut
    yield data[start:]
    yield b""


def read(run_dir: Path, data: bytes, cuts: list[int]):
    reader = MultipartReader(run_dir, LIMITS)
    return asyncio.run(reader.read(chunked(data, cuts), BOUNDARY))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(min_value=1, max_value=len(WHOLE) - 1), max_size=12))
def test_any_chunking_gives_the_same_payload_and_files(tmp_path_factory, cuts):
    run_dir = tmp_path_factory.mktemp("run")
    parsed = read(run_dir, WHOLE, cuts)
    assert parsed.request.ttl_hours == 24
    assert parsed.request.variables == {"topic": "汇总", "uploadedFiles": ["report.md", "inputs/2024/data.csv", "empty.txt"]}
    assert [(f.path, f.size) for f in parsed.files] == [("report.md", 21), ("inputs/2024/data.csv", 1024), ("empty.txt", 0)]
    assert (run_dir / "inputs" / "2024" / "data.csv").read_bytes() == bytes(range(256)) * 4
    assert parsed.files[1].sha256 == hashlib.sha256(bytes(range(256)) * 4).hexdigest()


def test_the_normalised_request_names_the_workflow_and_the_files_by_path_size_and_hash(tmp_path):
    parsed = read(tmp_path, WHOLE, [])
    normal = parsed.normalised("report-pipeline")
    assert normal["workflow"] == "report-pipeline" and normal["async"] is True and normal["ttlHours"] == 24
    assert normal["files"][2] == ["empty.txt", 0, hashlib.sha256(b"").hexdigest()]


def test_a_file_over_the_limit_stops_the_reading_with_payload_too_large(tmp_path):
    big = part(['Content-Disposition: form-data; name="files"; filename="big.bin"'], b"x" * (LIMITS.max_file_bytes + 1))
    with pytest.raises(ApiError) as refused:
        read(tmp_path, body(REPORT, big), [100, 5000])
    assert (refused.value.status, refused.value.code) == (413, "PAYLOAD_TOO_LARGE")
