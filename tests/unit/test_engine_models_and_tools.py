"""Per-visit scripted providers and the built-in demo tools."""

from __future__ import annotations

import pytest

from engine.context.tools import META, OUTPUT, PATHS
from engine.execution.models import scripted_from, visit_script
from engine.execution.tools import BUILTIN_TOOLS, READ_ONLY_TOOLS, is_idempotent, unknown_tools
from engine.llm import CompletionRequest, Message, collect
from engine.settings import Settings

SCRIPT = {"turns": [[{"text": "one"}], [{"text": "two"}], [{"text": "three"}]], "reformat": [[{"text": "{}"}]]}


async def answer(provider, purpose="node") -> str:
    request = CompletionRequest(messages=[Message("user", "go")], purpose=purpose)
    return (await collect(provider.stream(request))).text


async def test_a_resumed_visit_plays_its_script_after_the_turns_it_already_played():
    provider = scripted_from(visit_script(SCRIPT, {}), skip_turns=2, seed="s", pace_seconds=0)
    assert [await answer(provider), await answer(provider)] == ["three", "three"]
    assert await answer(provider, "reformat") == "{}"


async def test_skipping_past_the_end_keeps_the_last_turn():
    assert await answer(scripted_from(visit_script(SCRIPT, {}), skip_turns=9, seed="s", pace_seconds=0)) == "three"


def models_from(raw: str):
    return Settings.from_env({"FLOWTRAIL_MODELS": raw}).engine.models


def test_models_are_read_from_json_and_bad_json_is_named():
    assert models_from('[{"id": "m", "base_url": "http://127.0.0.1:1/v1", "model": "x"}]')[0].id == "m"
    assert models_from("") == ()
    with pytest.raises(SystemExit, match="FLOWTRAIL_MODELS"):
        models_from('[{"id": 1}]')


class Host:
    def __init__(self, workspace=None):
        self.run_id = None
        self.workspace = workspace
        self.streamed: list[tuple] = []

    async def stream(self, kind, content, tool_name=None):
        self.streamed.append((kind, content, tool_name))


async def test_web_search_is_deterministic_and_needs_a_query():
    first = await BUILTIN_TOOLS["web_search"].run(Host(), {"query": "tides"})
    assert first == await BUILTIN_TOOLS["web_search"].run(Host(), {"query": "tides"})
    assert '"url":"https://example.org/tides/' in first


async def test_todo_write_streams_the_list_as_a_todo_update():
    host = Host()
    result = await BUILTIN_TOOLS["todo_write"].run(host, {"todos": [{"content": "read", "status": "done"}]})
    assert result == "todo list updated (1 items)"
    assert host.streamed == [("todo_update", '[{"content":"read","status":"done"}]', "todo")]


def test_unknown_tool_names_are_reported_and_builtins_are_safe_to_repeat():
    assert unknown_tools(["web_search", "fly"]) == ["fly"]
    assert all(is_idempotent(name) for name in BUILTIN_TOOLS)


def test_a_tool_the_engine_does_not_know_such_as_a_gateways_terminal_is_not_safe_to_repeat():
    assert not is_idempotent("terminal") and not is_idempotent("write_file_remote")


def test_the_context_tools_are_the_read_only_ones_safe_to_repeat():
    assert READ_ONLY_TOOLS == {PATHS, OUTPUT, META} and all(is_idempotent(name) for name in READ_ONLY_TOOLS)


def test_a_script_without_references_is_parsed_once_for_every_visit_that_plays_it():
    script = [[{"text": "the same for every visit"}]]
    assert visit_script(script, {"topic": "a"}) is visit_script(script, {})
    assert visit_script([[{"text": "the same for every visit"}]], {})["node"] == [script[0]]


def test_a_script_with_references_is_rendered_against_each_visits_inputs():
    script = [[{"text": "about {{topic}}"}]]
    assert visit_script(script, {"topic": "owls"})["node"] == [[{"text": "about owls"}]]
    assert visit_script(script, {"topic": "bees"})["node"] == [[{"text": "about bees"}]]


def test_an_invalid_script_is_refused_each_time_it_is_played():
    for _ in range(2):
        with pytest.raises(ValueError, match="a step is a one-key object"):
            visit_script([[{"text": "a", "status": "b"}]], {})
