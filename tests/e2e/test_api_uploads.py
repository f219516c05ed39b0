"""Multipart run creation: files keep their directories, escapes and oversize files are refused, nothing is left behind."""

from __future__ import annotations

import io
import json
import zipfile
from uuid import UUID

import pytest

from engine.settings import UploadSettings
from tests.support.api import log_end

BASE = "/api/v1/workflows/report-pipeline/runs"
"""A workflow with no required input: these tests send files and no variables."""
LIMITS = UploadSettings(max_file_bytes=64 * 1024, max_request_bytes=256 * 1024)

pytestmark = pytest.mark.api(uploads=LIMITS)


def payload(body: dict) -> tuple[None, bytes, str]:
    return (None, json.dumps(body).encode(), "application/json")


def part(name: str, content: bytes, relative: str | None = None) -> tuple[str, bytes, str, dict[str, str]]:
    headers = {"X-Relative-Path": relative} if relative is not None else {}
    return (name, content, "application/octet-stream", headers)


def workspace_dirs(api) -> set[str]:
    root = api.settings.workspaces_dir
    return {p.name for p in root.iterdir()} if root.is_dir() else set()


async def refused(api, client, files, status, code) -> str:
    before_log, before_dirs = await log_end(api.services), workspace_dirs(api)
    response = await client.post(BASE, files=files)
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == code and body["data"] is None
    assert await log_end(api.services) == before_log, "a refused upload appended nothing"
    assert workspace_dirs(api) == before_dirs, "a refused upload left no files"
    return body["message"]


async def test_files_keep_their_relative_paths_and_are_injected_into_uploaded_files(api, client):
    files = [
        ("payload", payload({"variables": {"topic": "汇总报告"}, "async": True})),
        ("files", part("report.md", b"# report")),
        ("files", part("data.csv", b"a,b\n1,2\n", relative="inputs/2024/data.csv")),
        ("files", part("notes.txt", b"n", relative="inputs/2024/")),
    ]
    response = await client.post(BASE, files=files)
    assert response.status_code == 201, response.text
    run_id = response.json()["data"]["runId"]
    created = (await api.services.runs.events(UUID(run_id)))[0]
    expected = ["report.md", "inputs/2024/data.csv", "inputs/2024/notes.txt"]
    assert created.variables == {"topic": "汇总报告", "uploadedFiles": expected}
    assert list(created.uploaded_files) == expected
    base = api.services.workspace.path_for(UUID(run_id))
    assert (base / "inputs" / "2024" / "data.csv").read_bytes() == b"a,b\n1,2\n"
    archive = zipfile.ZipFile(io.BytesIO((await client.get(f"{BASE}/{run_id}/workspace")).content))
    assert sorted(archive.namelist()) == sorted(expected)


async def test_a_filename_with_directories_keeps_them_when_no_header_is_sent(api, client):
    response = await client.post(BASE, files=[("files", ("inputs/2024/data.csv", b"x", "text/csv"))])
    run_id = response.json()["data"]["runId"]
    assert (await api.services.runs.events(UUID(run_id)))[0].uploaded_files == ("inputs/2024/data.csv",)


async def test_an_empty_file_is_stored_and_recorded(api, client):
    response = await client.post(BASE, files=[("files", part("empty.txt", b""))])
    run_id = response.json()["data"]["runId"]
    assert (await api.services.runs.events(UUID(run_id)))[0].uploaded_files == ("empty.txt",)
    assert (api.services.workspace.path_for(UUID(run_id)) / "empty.txt").read_bytes() == b""
    workspace = (await client.get(f"{BASE}/{run_id}")).json()["data"]["workspace"]
    assert (workspace["fileCount"], workspace["totalBytes"]) == (1, 0)


async def test_the_payload_part_may_come_after_the_files_or_not_at_all(api, client):
    late = await client.post(BASE, files=[("files", part("a.txt", b"a")), ("payload", payload({"ttlHours": 5}))])
    created = (await api.services.runs.events(UUID(late.json()["data"]["runId"])))[0]
    assert created.ttl_hours == 5 and created.variables == {"uploadedFiles": ["a.txt"]}
    bare = await client.post(BASE, files=[("files", part("b.txt", b"b"))])
    assert bare.status_code == 201


@pytest.mark.parametrize("relative", [
    "../escape.txt", "inputs/../../escape.txt", "/etc/passwd", "C:/Windows/win.ini", "..\\..\\escape.txt", "..",
    "a/\x00/b",
])
async def test_a_path_that_escapes_the_workspace_is_refused(api, client, relative):
    files = [("files", part("ok.txt", b"fine")), ("files", part("x.txt", b"evil", relative=relative))]
    message = await refused(api, client, files, 400, "VALIDATION_FAILED")
    assert "path" in message


async def test_two_files_with_one_path_or_a_file_where_a_directory_is_are_refused(api, client):
    await refused(api, client, [("files", part("a.txt", b"1")), ("files", part("a.txt", b"2"))], 400, "VALIDATION_FAILED")
    await refused(api, client, [("files", part("a", b"1")), ("files", part("x", b"2", relative="a/b.txt"))],
                  400, "VALIDATION_FAILED")


async def test_a_file_over_the_size_limit_is_payload_too_large_and_nothing_is_written(api, client):
    files = [("files", part("small.txt", b"ok")), ("files", part("big.bin", b"x" * (LIMITS.max_file_bytes + 1)))]
    message = await refused(api, client, files, 413, "PAYLOAD_TOO_LARGE")
    assert "big.bin" in message and str(LIMITS.max_file_bytes) in message


async def test_a_file_of_exactly_the_limit_is_accepted(api, client):
    response = await client.post(BASE, files=[("files", part("edge.bin", b"x" * LIMITS.max_file_bytes))])
    assert response.status_code == 201


async def test_a_request_over_the_request_limit_is_payload_too_large_and_nothing_is_written(api, client):
    files = [("files", part(f"f{i}.bin", b"y" * (LIMITS.max_file_bytes - 1000))) for i in range(5)]
    await refused(api, client, files, 413, "PAYLOAD_TOO_LARGE")


async def test_a_json_body_over_one_mebibyte_is_payload_too_large(api, client):
    before = await log_end(api.services)
    big = {"variables": {"blob": "z" * (1024 * 1024)}}
    response = await client.post(BASE, json=big)
    assert (response.status_code, response.json()["code"]) == (413, "PAYLOAD_TOO_LARGE")
    assert await log_end(api.services) == before


@pytest.mark.parametrize("files,fragment", [
    ([("other", (None, b"x"))], "unexpected multipart part"),
    ([("payload", payload({})), ("payload", payload({}))], "more than one"),
    ([("payload", (None, b"{not json", "application/json"))], "not valid JSON"),
    ([("payload", payload({"variables": {"uploadedFiles": ["x"]}}))], "uploadedFiles"),
    ([("files", (None, b"no name"))], "filename"),
])
async def test_malformed_multipart_parts_are_validation_failed(api, client, files, fragment):
    assert fragment in await refused(api, client, files, 400, "VALIDATION_FAILED")


async def test_a_truncated_multipart_body_is_validation_failed(api, client):
    body = b"--XYZ\r\nContent-Disposition: form-data; name=\"files\"; filename=\"a.txt\"\r\n\r\npartial"
    before = await log_end(api.services)
    response = await client.post(BASE, content=body, headers={"Content-Type": "multipart/form-data; boundary=XYZ"})
    assert (response.status_code, response.json()["code"]) == (400, "VALIDATION_FAILED")
    assert await log_end(api.services) == before


async def test_multipart_without_a_boundary_is_validation_failed(api, client):
    response = await client.post(BASE, content=b"x", headers={"Content-Type": "multipart/form-data"})
    assert (response.status_code, response.json()["code"]) == (400, "VALIDATION_FAILED")
