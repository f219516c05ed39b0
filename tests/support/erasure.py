"""Runs whose content is marked, to show where it goes once they are erased."""

from __future__ import annotations

import json
from uuid import UUID

from tests.support.api import complete_visit, finish, open_visit, stream

BASE = "/api/v1/workflows/report-pipeline/runs"
MARKERS = ("SECRET-VARIABLE-1f3a", "SECRET-UPLOAD-9c2e", "SECRET-THINKING-77d0", "SECRET-OUTPUT-4b81")
VARIABLE, UPLOAD, THINKING, OUTPUT = MARKERS


async def finished_run(api, client, tag: str = "") -> UUID:
    """A run of report-pipeline with a marker in its variables, an uploaded file, its thinking and its output."""
    files = [
        ("payload", (None, json.dumps({"variables": {"topic": VARIABLE + tag}}).encode(), "application/json")),
        ("files", ("notes.txt", (UPLOAD + tag).encode(), "text/plain")),
    ]
    response = await client.post(BASE, files=files)
    assert response.status_code == 201, response.text
    run_id = UUID(response.json()["data"]["runId"])
    assert (await client.post(f"{BASE}/{run_id.hex}/start")).status_code == 200
    visit = await open_visit(api.services, run_id)
    await stream(api.services, run_id, visit, "thinking", f"I think {THINKING}{tag} here")
    await stream(api.services, run_id, visit, "tool_call", f'{{"q":"{VARIABLE}{tag}"}}', tool_name="search")
    await complete_visit(api.services, run_id, visit, output={"status": 200, "message": "ok", "data": {"x": OUTPUT + tag}})
    await finish(api.services, run_id, data={"summary": OUTPUT + tag})
    await api.services.runs.release(run_id)
    return run_id


def no_marker(text: str | bytes) -> bool:
    raw = text.encode() if isinstance(text, str) else text
    return not any(marker.encode() in raw for marker in MARKERS)
