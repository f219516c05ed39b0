"""The client's listing and `flowtrail runs list`, against the run listing of a real server."""

from __future__ import annotations

import json

import httpx
import msgspec
import pytest

from flowtrail_client import FlowtrailClient, RunListItem
from tests.e2e.test_runs_cli import flowtrail
from tests.integration.test_client_schema import wire_names
from tests.support.runs import OTHER_FLOW, new_run, run_with_steps

pytestmark = pytest.mark.store


@pytest.fixture
def listing(server):
    """The server whose runs are listed."""
    return server


async def test_the_listing_answers_the_runs_newest_first_a_page_at_a_time(listing):
    made = [(await run_with_steps(listing.services, 1)).hex for _ in range(5)]
    async with FlowtrailClient(listing.base_url, "test-key-all") as client:
        first = await client.list(limit=3)
        rest = await client.list(limit=3, cursor=first.next_cursor)
    listed = first.items + rest.items
    assert sorted(run.run_id for run in listed) == sorted(made)
    assert listed == sorted(listed, key=lambda run: (run.created_at, run.run_id), reverse=True)
    assert first.next_cursor is not None and rest.next_cursor is None
    assert all(run.status == "SUCCESS" and run.workflow_name == "allowed-flow" for run in first.items)


async def test_the_listing_filters_by_status_and_workflow(listing):
    done = await run_with_steps(listing.services, 1)
    running = await new_run(listing.services, OTHER_FLOW)
    async with FlowtrailClient(listing.base_url, "test-key-all") as client:
        succeeded = await client.list(status="SUCCESS")
        other = await client.list(workflow="other-flow")
    assert [run.run_id for run in succeeded.items] == [done.hex]
    assert [run.run_id for run in other.items] == [running.hex]


async def test_a_listed_run_has_exactly_the_fields_of_the_listing_schema(listing):
    async with httpx.AsyncClient(base_url=listing.base_url) as http:
        document = (await http.get("/schema/openapi.json")).json()
    schemas = document["components"]["schemas"]
    envelope = document["paths"]["/api/v1/runs"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    page = resolve(schemas, resolve(schemas, envelope)["properties"]["data"])
    item = resolve(schemas, page["properties"]["items"]["items"])
    assert wire_names(RunListItem)[0] == set(item["properties"])


def resolve(schemas: dict, schema: dict) -> dict:
    """A schema, its `$ref` followed."""
    return schemas[schema["$ref"].rpartition("/")[2]] if "$ref" in schema else schema


async def test_flowtrail_runs_list_prints_the_page_as_json(listing):
    run_id = await run_with_steps(listing.services, 1)
    done = await flowtrail(listing, "list", "--json")
    assert done.returncode == 0, done.stderr
    page = json.loads(done.stdout)
    assert [item["runId"] for item in page["items"]] == [run_id.hex]
    assert msgspec.convert(page["items"][0], RunListItem).status == "SUCCESS"
