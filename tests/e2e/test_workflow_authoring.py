"""Authoring feedback over real HTTP and the real command: the schema URL, run variables checked at creation,
`flowtrail validate`."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from domain.workflow import workflow_json_schema

ROOT = Path(__file__).resolve().parents[2]
RUNS = "/api/v1/workflows/military-analyze-agent/runs"
SCHEMA_URL = "/api/v1/schemas/workflow.json"


async def run_count(api) -> int:
    return len(await api.services.store.read_all("RunCreated"))


async def test_the_workflow_schema_is_served_without_a_key_as_json_schema(api):
    async with httpx.AsyncClient(base_url=api.base_url) as anonymous:
        response = await anonymous.get(SCHEMA_URL)
        openapi = (await anonymous.get("/schema/openapi.json")).json()
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/schema+json")
    assert response.json() == workflow_json_schema()
    operation = openapi["paths"][SCHEMA_URL]["get"]
    assert operation["operationId"] == "getWorkflowSchema" and "No API key is needed" in operation["description"]


async def test_a_run_without_a_required_variable_is_refused_naming_it_and_nothing_is_written(api, client):
    before = await run_count(api)
    response = await client.post(RUNS, json={"variables": {"maxTokens": 10}})
    assert response.status_code == 400
    assert response.json() == {
        "code": "VALIDATION_FAILED", "message": "variables: missing required input(s): topic", "data": None,
    }
    assert await run_count(api) == before


async def test_a_variable_of_the_wrong_declared_type_is_refused_naming_it_and_nothing_is_written(api, client):
    before = await run_count(api)
    response = await client.post(RUNS, json={"variables": {"topic": ["a", "list"], "maxTokens": "many"}})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "VALIDATION_FAILED"
    assert body["message"] == (
        "variables: 'topic' must be of type string, got array; 'maxTokens' must be of type number, got string"
    )
    assert await run_count(api) == before


async def test_a_multipart_creation_is_checked_the_same_way(api, client):
    before = await run_count(api)
    response = await client.post(RUNS, files={"payload": (None, json.dumps({"variables": {}}))})
    assert response.status_code == 400 and "topic" in response.json()["message"]
    assert await run_count(api) == before


def flowtrail_validate(*args: str, models: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FLOWTRAIL_MODELS": models}
    return subprocess.run([sys.executable, "-m", "scripts.cli", "validate", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def demo_report() -> dict:
    return json.loads((ROOT / "engine" / "demos" / "demo-report.json").read_text(encoding="utf-8"))


async def test_validate_lists_every_problem_of_every_file_with_its_path_and_exits_1(tmp_path, demo_report):
    typo = copy.deepcopy(demo_report)
    typo["nodes"][2]["data"]["promt"] = typo["nodes"][2]["data"].pop("prompt")
    typo["nodes"][3]["data"]["model_id"] = "gpt-9"
    (tmp_path / "typo.json").write_text(json.dumps(typo), encoding="utf-8")
    (tmp_path / "same-name.json").write_text(json.dumps(demo_report), encoding="utf-8")
    (tmp_path / "list.json").write_text("[]", encoding="utf-8")
    done = await asyncio.to_thread(flowtrail_validate, *sorted(str(p) for p in tmp_path.iterdir()))
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert f"{tmp_path / 'typo.json'}: $.nodes[2].data.promt: unknown field" in lines
    assert f"{tmp_path / 'typo.json'}: $.nodes[3].data.model_id: model 'gpt-9' is not configured (configured: scripted)" in lines
    assert f"{tmp_path / 'list.json'}: $: Expected `object`, got `array`" in lines
    assert f"{tmp_path / 'same-name.json'}: $.name: workflow name 'demo-report' is also used by {tmp_path / 'typo.json'}" in lines
    assert len(lines) == 5 and "Traceback" not in done.stderr


async def test_validate_knows_the_configured_models_and_says_ok_in_one_line(tmp_path, demo_report):
    demo_report["nodes"][3]["data"]["model_id"] = "local"
    (tmp_path / "report.json").write_text(json.dumps(demo_report), encoding="utf-8")
    models = json.dumps([{"id": "local", "base_url": "http://127.0.0.1:9/v1", "model": "m"}])
    done = await asyncio.to_thread(flowtrail_validate, str(tmp_path / "report.json"), models=models)
    assert (done.returncode, done.stdout) == (0, "OK: 1 workflow file(s), no problems\n")


async def test_validate_prints_the_committed_schema():
    done = await asyncio.to_thread(flowtrail_validate, "--print-schema")
    assert done.returncode == 0
    assert done.stdout == (ROOT / "docs" / "workflow.schema.json").read_text(encoding="utf-8")
