"""Client input the service once answered with 500: long byte names, deep JSON, odd Last-Event-IDs (decision 15).

Each is a 400 in the documented envelope; nothing is appended and no upload folder is left.
"""

from __future__ import annotations

from uuid import UUID

from tests.support.api import log_end

BASE = "/api/v1/workflows/military-analyze-agent/runs"
LONG_CJK_NAME = "报" * 86 + ".md"
"""89 characters, 261 bytes in UTF-8: within a count of characters, over the filesystem's 255 bytes."""


def workspace_dirs(api) -> set[str]:
    root = api.settings.workspaces_dir
    return {p.name for p in root.iterdir()} if root.is_dir() else set()


async def assert_refused(api, send, fragment: str) -> None:
    before_log, before_dirs = await log_end(api.services), workspace_dirs(api)
    response = await send()
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["code"] == "VALIDATION_FAILED" and body["data"] is None
    assert fragment in body["message"], body["message"]
    assert await log_end(api.services) == before_log, "a refused request appended nothing"
    assert workspace_dirs(api) == before_dirs, "a refused request left no folder"


async def test_an_upload_name_over_255_bytes_is_refused_though_it_is_under_255_characters(api, client):
    files = [("files", (LONG_CJK_NAME, b"x", "text/markdown"))]
    await assert_refused(api, lambda: client.post(BASE, files=files), "255 bytes")


async def test_a_relative_path_segment_over_255_bytes_is_refused(api, client):
    files = [("files", ("a.md", b"x", "text/markdown", {"X-Relative-Path": f"inputs/{LONG_CJK_NAME}"}))]
    await assert_refused(api, lambda: client.post(BASE, files=files), "255 bytes")


async def test_a_name_of_exactly_255_bytes_is_accepted(api, client):
    name = "报" * 84 + ".md"
    assert len(name.encode()) == 255
    response = await client.post(BASE, files=[("files", (name, b"x", "text/markdown"))])
    assert response.status_code == 201, response.text
    run_id = UUID(response.json()["data"]["runId"])
    assert (api.services.workspace.path_for(run_id) / name).read_bytes() == b"x"
