"""The Python client against a real server running the demo workflows, on both stores."""

from __future__ import annotations

import json

import pytest

from flowtrail_client import ApiError, FlowtrailClient, ServiceUnavailable

pytestmark = pytest.mark.store


@pytest.fixture
async def flowtrail_client(demo_server):
    async with FlowtrailClient(demo_server.base_url, "test-key-all") as client:
        yield client


async def test_a_run_created_started_and_followed_ends_with_its_outputs(flowtrail_client):
    run = await flowtrail_client.create("demo-report", {"topic": "tidal energy"})
    assert run.status == "CREATED" and run.workflow_name == "demo-report"
    started = await flowtrail_client.start(run)
    assert started.status == "RUNNING" and started.run_id == run.run_id
    messages = [message async for message in flowtrail_client.stream(run)]
    assert messages[-1].event == "workflow_complete" and messages[-1].terminal
    assert [m.id for m in messages] == sorted({m.id for m in messages})
    result = await flowtrail_client.get(run)
    assert result.status == "SUCCESS" and result.outputs and all(node.status == "SUCCESS" for node in result.nodes)


async def test_the_events_of_a_run_are_its_whole_log_and_resume_after_a_position(flowtrail_client):
    run = await flowtrail_client.create("demo-report", {"topic": "tidal energy"})
    await flowtrail_client.start(run)
    last = [message async for message in flowtrail_client.stream(run)][-1].id
    lines = [line async for line in flowtrail_client.events(run)]
    assert [line.position for line in lines] == list(range(1, last + 1))
    assert lines[0].type == "RunCreated" and lines[0].data()["workflow_name"] == "demo-report"
    assert [line.position async for line in flowtrail_client.events(run, after=last - 2)] == [last - 1, last]


async def test_a_question_is_answered_once_and_a_repeated_answer_counts_as_success(flowtrail_client):
    run = await flowtrail_client.create("demo-clarify", {"topic": "tidal energy"})
    await flowtrail_client.start(run)
    async for message in flowtrail_client.stream(run):
        if message.data.get("kind") == "clarify_request":
            asked = json.loads(message.data["content"])
            pause = (await flowtrail_client.state(run.run_id)).current_pause
            assert pause is not None and pause.clarify_id == asked["clarify_id"]
            first = await flowtrail_client.answer(run, asked["clarify_id"], asked["choices"][0])
            again = await flowtrail_client.answer(run, asked["clarify_id"], asked["choices"][0])
            assert first.clarify_id == again.clarify_id and not again.accepted
    assert (await flowtrail_client.get(run)).status == "SUCCESS"


async def test_a_run_known_by_its_id_alone_is_found_through_its_first_event(demo_server, flowtrail_client):
    run = await flowtrail_client.create("demo-report", {"topic": "tidal energy"})
    async with FlowtrailClient(demo_server.base_url, "test-key-all") as fresh:
        assert (await fresh.get(run.run_id)).workflow_name == "demo-report"
        cancelled = await fresh.cancel(run.run_id)
    assert cancelled.outcome in ("REQUESTED", "ALREADY_FINISHED") and cancelled.run_id == run.run_id


async def test_refusals_come_back_as_ApiError_with_the_service_code(demo_server, flowtrail_client):
    with pytest.raises(ApiError) as unknown_run:
        await flowtrail_client.get("0" * 32)
    with pytest.raises(ApiError) as unknown_workflow:
        await flowtrail_client.create("no-such-flow")
    async with FlowtrailClient(demo_server.base_url, "wrong-key") as stranger:
        with pytest.raises(ApiError) as unauthorized:
            await stranger.create("demo-report")
    assert (unknown_run.value.status, unknown_run.value.code) == (404, "RUN_NOT_FOUND")
    assert (unknown_workflow.value.status, unknown_workflow.value.code) == (404, "WORKFLOW_NOT_FOUND")
    assert (unauthorized.value.status, unauthorized.value.code) == (401, "UNAUTHORIZED")


async def test_a_service_that_is_not_there_is_ServiceUnavailable(demo_server):
    await demo_server.stop()
    async with FlowtrailClient(demo_server.base_url, "test-key-all") as flowtrail_client:
        with pytest.raises(ServiceUnavailable, match="cannot reach"):
            await flowtrail_client.health()
