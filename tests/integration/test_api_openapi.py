"""The OpenAPI document shows what a stream sends: every SSE payload's schema, generated from its Struct."""

from __future__ import annotations

import httpx
import msgspec

from projections.payloads import SSE_PAYLOADS
from tests.support.api import start_api_server
from tests.support.stores import store_url

RUNS = "/api/v1/workflows/{workflowName}/runs"


async def openapi_document(tmp_path) -> dict:
    url, _ = store_url("sqlite", tmp_path)
    server = await start_api_server(url, tmp_path / "data")
    try:
        async with httpx.AsyncClient(base_url=server.base_url) as client:
            return (await client.get("/schema/openapi.json")).json()
    finally:
        await server.stop()


def event_schema(response: dict) -> dict:
    return response["content"]["text/event-stream"]["schema"]


async def test_the_stream_answers_events_whose_json_data_is_any_of_the_payload_schemas(tmp_path):
    document = await openapi_document(tmp_path)
    stream = document["paths"][RUNS + "/{runId}/stream"]["get"]["responses"]["200"]
    blocking_creation = document["paths"][RUNS]["post"]["responses"]["200"]
    event = event_schema(stream)
    assert event_schema(blocking_creation) == event and "application/json" in blocking_creation["content"]
    assert set(event["required"]) == {"event", "id", "data"}
    assert event["properties"]["event"]["enum"] == [
        "node_status", "node_stream", "visit_recorded", "planner_decision", "workflow_complete", "workflow_error",
        "snapshot",
    ]
    data = event["properties"]["data"]
    assert data["contentMediaType"] == "application/json"
    refs = [one["$ref"] for one in data["contentSchema"]["anyOf"]]
    assert refs == [f"#/components/schemas/{payload.__name__}" for payload in SSE_PAYLOADS]
    assert all(ref.rsplit("/", 1)[1] in document["components"]["schemas"] for ref in refs)


async def test_each_payload_schema_has_the_fields_and_type_of_its_struct(tmp_path):
    schemas = (await openapi_document(tmp_path))["components"]["schemas"]
    for payload in SSE_PAYLOADS:
        fields = {field.encode_name: field for field in msgspec.structs.fields(payload)}
        documented = schemas[payload.__name__]["properties"]
        assert set(documented) == set(fields), payload.__name__
        assert documented["type"]["const"] == fields["type"].default
    assert schemas["NodeStatusRunningPayload"]["properties"]["status"]["const"] == "RUNNING"
    assert schemas["NodeStatusEndedPayload"]["properties"]["status"]["enum"] == ["SUCCESS", "FAILED", "SKIPPED"]
