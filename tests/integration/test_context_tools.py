"""The agent's context tools against a server that misbehaves: they obey §9 and never raise."""

from __future__ import annotations

import json
import logging
import time
from uuid import uuid4

import pytest

from engine.context.tools import MAX_VALUE_BYTES, ContextToolbox, build_toolbox
from tests.fakes.misbehaving_context import MisbehavingContextServer, Reply, failure, success

RUN = uuid4()
TOKEN = "ab12" + "c" * 44
OUTPUT = {"nodeId": "B", "iterSeq": 1, "visitUuid": "v2", "status": 200, "message": "ok",
          "data": {"result": "hello"}, "requestedField": None}


@pytest.fixture
async def fake():
    server = MisbehavingContextServer()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def toolbox(fake):
    box = ContextToolbox(base_url=fake.base_url, run_id=RUN, visit_uuid="v4", token=TOKEN,
                         timeout_seconds=0.3, max_calls=5, retry_backoff_seconds=0.01)
    yield box
    await box.aclose()


async def call(box: ContextToolbox, name: str, **arguments) -> dict:
    return json.loads(await box.call(name, arguments))


async def test_each_tool_posts_its_query_with_the_token_in_a_header_only(toolbox, fake):
    fake.will(success({"paths": []}), success(OUTPUT), success({"thinking": "t"}))
    await call(toolbox, "get_predecessor_paths")
    await call(toolbox, "get_node_output", node_id="B", field="result", iter_seq=1)
    await call(toolbox, "get_node_meta", node_id="B", kind="thinking")
    seen = fake.requests
    assert [r.path for r in seen] == ["/internal/context/path", "/internal/context/output", "/internal/context/meta"]
    assert all(r.headers["x-context-token"] == TOKEN and TOKEN not in r.path for r in seen)
    assert [r.body for r in seen] == [
        {"runId": RUN.hex, "visitUuid": "v4"},
        {"runId": RUN.hex, "nodeId": "B", "field": "result", "iterSeq": 1},
        {"runId": RUN.hex, "visitUuid": None, "nodeId": "B", "kind": "THINKING", "iterSeq": None},
    ]


async def test_an_answer_is_reduced_to_whitelisted_fields(toolbox, fake):
    evil = {**OUTPUT, "token": TOKEN, "__class__": "x", "runId": RUN.hex}
    fake.will(success(evil, token=TOKEN))
    assert await call(toolbox, "get_node_output", node_id="B") == OUTPUT


async def test_list_items_keep_only_their_whitelisted_fields(toolbox, fake):
    fake.will(success({"toolCalls": [{"tool": "s", "args": "{}", "exec": "rm -rf /"}, "junk"]}))
    result = await call(toolbox, "get_node_meta", node_id="B", kind="TOOL_CALLS")
    assert result == {"toolCalls": [{"tool": "s", "args": "{}"}]}


async def test_a_redirect_is_not_followed_and_becomes_an_error(toolbox, fake):
    fake.will(Reply(status=302, body={}, headers={"Location": "http://evil.example/steal"}))
    result = await call(toolbox, "get_node_output", node_id="B")
    assert "Location" in result["error"] and len(fake.requests) == 1


async def test_an_answer_that_sets_a_cookie_is_discarded(toolbox, fake):
    fake.will(Reply(body={"code": 200, "message": "success", "data": OUTPUT},
                                   headers={"Set-Cookie": "session=1"}))
    result = await call(toolbox, "get_node_output", node_id="B")
    assert set(result) == {"error"} and "Set-Cookie" in result["error"]


async def test_a_hanging_server_times_out_without_a_retry(toolbox, fake):
    fake.will(Reply(hang=True))
    started = time.monotonic()
    result = await call(toolbox, "get_predecessor_paths")
    assert result == {"error": "context query timed out"}
    assert time.monotonic() - started < 1.5 and len(fake.requests) == 1


async def test_the_timeout_never_exceeds_five_seconds(fake):
    box = build_toolbox(fake.base_url, RUN, "v4", TOKEN, timeout_seconds=60)
    assert max(box._client.timeout.as_dict().values()) <= 5.0
    await box.aclose()


async def test_a_visit_that_calls_no_context_tool_opens_no_http_client(fake):
    box = build_toolbox(fake.base_url, RUN, "v5", TOKEN)
    await box.aclose()
    assert box._http is None and fake.requests == []


async def test_a_server_error_is_retried_once_and_then_given_up(toolbox, fake):
    fake.will(failure(500, "boom"), failure(502, "bad gateway"), success(OUTPUT))
    result = await call(toolbox, "get_node_output", node_id="B")
    assert result == {"error": "context query answered 502: bad gateway"}
    assert len(fake.requests) == 2


async def test_a_dropped_connection_succeeds_on_the_one_retry(toolbox, fake):
    fake.will(Reply(drop=True), success(OUTPUT))
    assert await call(toolbox, "get_node_output", node_id="B") == OUTPUT
    assert len(fake.requests) == 2


@pytest.mark.parametrize("status,message", [(401, "invalid context token"), (404, "node B has no visit"),
                                            (503, "context query is disabled")])
async def test_a_refusal_is_reported_without_a_retry(toolbox, fake, status, message):
    fake.will(failure(status, message))
    result = await call(toolbox, "get_node_output", node_id="B")
    assert result == {"error": f"context query answered {status}: {message}"}
    assert len(fake.requests) == 1


@pytest.mark.parametrize("body", [b"<html>not json</html>", b'{"code": 200, "data": "text"}', b"[1,2]"])
async def test_a_malformed_answer_is_an_error(toolbox, fake, body):
    fake.will(Reply(body=body))
    assert "malformed" in (await call(toolbox, "get_node_output", node_id="B"))["error"]


async def test_a_huge_single_value_is_cut_to_100_kb_and_marked_truncated(toolbox, fake):
    fake.will(success({**OUTPUT, "data": "é" * MAX_VALUE_BYTES}))
    result = await call(toolbox, "get_node_output", node_id="B")
    assert len(result["data"].encode()) <= MAX_VALUE_BYTES and result["data"].startswith("éé")
    assert result["truncated"] is True and result["truncatedFields"] == ["data"]
    assert result["nodeId"] == "B"


async def test_a_huge_log_keeps_the_entries_that_fit_in_100_kb(toolbox, fake):
    entry = {"type": "STEP", "timestamp": "t", "message": "m" * 1000, "detail": None}
    fake.will(success({"nodeId": "B", "logs": [entry] * 500, "thinking": "short"}))
    result = await call(toolbox, "get_node_meta", node_id="B")
    assert 50 < len(result["logs"]) < 110 and result["logs"][0] == entry
    assert result["truncated"] is True and result["truncatedFields"] == ["logs"]
    assert result["thinking"] == "short"


async def test_a_large_object_becomes_cut_json_text(toolbox, fake):
    data = {f"k{i}": "v" * 1000 for i in range(300)}
    fake.will(success({**OUTPUT, "data": data}))
    result = await call(toolbox, "get_node_output", node_id="B")
    assert isinstance(result["data"], str) and result["data"].startswith('{"k0":"vvv')
    assert len(result["data"].encode()) <= MAX_VALUE_BYTES and result["truncated"] is True


async def test_paths_at_the_cap_of_100_come_with_a_note_to_query_more_precisely(toolbox, fake):
    path = {"sequence": ["A"], "visitUuids": ["v1"], "hasBacktrack": False}
    fake.will(success({"paths": [path] * 100, "truncated": True}))
    result = await call(toolbox, "get_predecessor_paths")
    assert result["truncated"] is True and "truncated" in result["note"]


async def test_the_tool_description_warns_that_paths_may_be_cut_at_100(toolbox):
    (paths,) = [spec for spec in toolbox.specs() if spec.name == "get_predecessor_paths"]
    assert "truncated" in paths.description and "100 paths" in paths.description
    assert {spec.name for spec in toolbox.specs()} == toolbox.names == {
        "get_predecessor_paths", "get_node_output", "get_node_meta"}


async def test_calls_beyond_the_per_visit_cap_are_refused_without_a_request(toolbox, fake):
    fake.will(success(OUTPUT))
    results = [await call(toolbox, "get_node_output", node_id="B") for _ in range(7)]
    assert results[:5] == [OUTPUT] * 5
    assert results[5:] == [{"error": "context tool call limit reached (5 calls per visit)"}] * 2
    assert len(fake.requests) == 5


@pytest.mark.parametrize("name,arguments,error", [
    ("get_node_output", {}, "node_id is required"),
    ("get_node_output", {"node_id": 3}, "node_id must be a string"),
    ("get_node_output", {"node_id": "B", "iter_seq": 0}, "iter_seq must be a whole number >= 1"),
    ("get_node_meta", {"kind": "ALL"}, "give node_id or visit_uuid"),
    ("get_node_meta", {"node_id": "B", "kind": "SECRETS"}, "kind must be one of THINKING, TOOL_CALLS, TODO, ALL"),
    ("eval", {}, "unknown tool 'eval'"),
])
async def test_bad_arguments_are_refused_without_a_request(toolbox, fake, name, arguments, error):
    assert json.loads(await toolbox.call(name, arguments)) == {"error": error}
    assert fake.requests == []


async def test_a_base_url_that_is_not_loopback_gets_no_toolbox_and_a_warning(caplog):
    caplog.set_level(logging.WARNING, "flowtrail.context.tools")
    assert build_toolbox("http://context.example.com:2438", RUN, "v4", TOKEN) is None
    assert build_toolbox("http://10.1.2.3:2438", RUN, "v4", TOKEN) is None
    assert "not a loopback address" in caplog.text and TOKEN[:5] not in caplog.text
    with pytest.raises(ValueError):
        ContextToolbox(base_url="http://example.com", run_id=RUN, visit_uuid="v4", token=TOKEN)


async def test_the_token_is_never_shown_beyond_its_first_four_characters(toolbox, fake, caplog):
    caplog.set_level(logging.DEBUG)
    fake.will(Reply(hang=True), failure(401, "invalid context token"))
    results = [await toolbox.call("get_predecessor_paths", {}), await toolbox.call("get_node_output", {"node_id": "B"})]
    assert repr(toolbox).endswith("token=ab12***)")
    shown = caplog.text + repr(toolbox) + "".join(results)
    assert TOKEN not in shown and TOKEN[:5] not in shown
