"""Client input the service once answered with 500: long byte names, deep JSON, odd Last-Event-IDs (decision 15).

Each is a 400 in the documented envelope; nothing is appended and no upload folder is left.
"""

from __future__ import annotations

import json
from uuid import UUID, uuid4

import pytest

from api.jsonbody import MAX_JSON_DEPTH
from tests.support.api import finish, log_end

BASE = "/api/v1/workflows/military-analyze-agent/runs"
BLOCKING = "/api/v1/workflows/report-pipeline/runs"
LONG_CJK_NAME = "报" * 86 + ".md"
"""89 characters, 261 bytes in UTF-8: within a count of characters, over the filesystem's 255 bytes."""
DEEP = "[" * 1000 + "]" * 1000
"""2 KB of JSON nested 1,000 deep."""
ODD_IDS = [b"9" * 5000, "²".encode("latin-1"), "1¹²³".encode("latin-1")]
"""Beyond Python's 4,300-digit int limit, and superscripts (latin-1 in the header; `isdigit` takes them, `int` not)."""
ODD_ID_NAMES = ["5000-digits", "superscript", "digits-and-superscripts"]


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


@pytest.mark.parametrize("name", [
    "report\u202etxt.md", "left\u2066isolate.md", "escape\x1b[31mred.md", "c1\x85.md", "del\x7f.md",
], ids=["right-to-left-override", "left-to-right-isolate", "escape", "c1-next-line", "delete"])
async def test_an_upload_name_with_a_control_or_bidirectional_formatting_character_is_refused(api, client, name):
    """(httpx sends the other C0 characters of a file name percent-encoded, as HTML forms do.)"""
    files = [("files", (name, b"x", "text/markdown"))]
    await assert_refused(api, lambda: client.post(BASE, files=files), "control or bidirectional-formatting character")


async def test_a_name_of_exactly_255_bytes_is_accepted(api, client):
    name = "报" * 84 + ".md"
    assert len(name.encode()) == 255
    response = await client.post(BLOCKING, files=[("files", (name, b"x", "text/markdown"))])
    assert response.status_code == 201, response.text
    run_id = UUID(response.json()["data"]["runId"])
    assert (api.services.workspace.path_for(run_id) / name).read_bytes() == b"x"


async def test_a_creation_body_nested_a_thousand_deep_is_refused_naming_the_limit(api, client):
    body = '{"variables": {"topic": ' + DEEP + "}}"
    send = lambda: client.post(BASE, content=body, headers={"Content-Type": "application/json"})  # noqa: E731
    await assert_refused(api, send, f"{MAX_JSON_DEPTH} levels")


async def test_a_multipart_payload_nested_a_thousand_deep_is_refused(api, client):
    payload = ('{"variables": {"topic": ' + DEEP + "}}").encode()
    files = [("payload", (None, payload, "application/json")), ("files", ("a.md", b"x", "text/markdown"))]
    await assert_refused(api, lambda: client.post(BASE, files=files), f"{MAX_JSON_DEPTH} levels")


async def test_a_resume_body_nested_a_thousand_deep_is_refused(api, client):
    body = '{"clarifyId": "c", "answer": "a", "more": ' + DEEP + "}"
    send = lambda: client.post(  # noqa: E731
        f"/api/v1/runs/{uuid4().hex}/resume", content=body, headers={"Content-Type": "application/json"}
    )
    await assert_refused(api, send, f"{MAX_JSON_DEPTH} levels")


async def test_json_nested_to_the_limit_is_accepted(api, client):
    nested = "[" * (MAX_JSON_DEPTH - 2) + "]" * (MAX_JSON_DEPTH - 2)
    body = '{"variables": {"topic": "tides", "nested": ' + nested + "}}"
    response = await client.post(BASE, content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 201, response.text


async def test_strings_that_look_like_brackets_do_not_count_as_nesting(api, client):
    body = json.dumps({"variables": {"topic": "[" * 1000 + "{" * 1000, "note": '\\"[[['}})
    response = await client.post(BASE, content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 201, response.text


@pytest.mark.parametrize("value", ODD_IDS, ids=ODD_ID_NAMES)
async def test_a_last_event_id_that_is_not_ascii_digits_or_too_long_is_refused_on_the_stream(api, client, value):
    run_id = (await client.post(BASE, json={"variables": {"topic": "tides"}})).json()["data"]["runId"]
    send = lambda: client.get(f"{BASE}/{run_id}/stream", headers={"Last-Event-ID": value})  # noqa: E731
    await assert_refused(api, send, "Last-Event-ID")


@pytest.mark.parametrize("value", ODD_IDS, ids=ODD_ID_NAMES)
async def test_a_last_event_id_that_is_not_ascii_digits_is_refused_on_the_blocking_replay(api, client, request, value):
    key = f"hostile-{request.node.name}"[:200].replace("[", "-").replace("]", "")
    async with client.stream("POST", BLOCKING, json={"async": False}, headers={"Idempotency-Key": key}) as first:
        assert first.status_code == 200
        run_id = first.headers["x-run-id"]
    await finish(api.services, UUID(run_id))
    send = lambda: client.post(  # noqa: E731
        BLOCKING, json={"async": False}, headers={"Idempotency-Key": key, "Last-Event-ID": value}
    )
    await assert_refused(api, send, "Last-Event-ID")


async def test_the_schema_documents_the_last_event_id_rule_where_the_header_is_read(client):
    schema = (await client.get("/schema/openapi.json")).json()
    runs = schema["paths"]["/api/v1/workflows/{workflowName}/runs"]
    stream = schema["paths"]["/api/v1/workflows/{workflowName}/runs/{runId}/stream"]
    for operation in (runs["post"], stream["get"]):
        header = next(p for p in operation["parameters"] if p["name"] == "Last-Event-ID")
        assert "19 ASCII digits" in header["description"]
