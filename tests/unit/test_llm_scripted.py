"""The scripted provider plays its script deterministically, with no model and no network."""

import asyncio
import json
import time

import pytest

from engine.llm import (
    ClarifyAsk,
    CompletionRequest,
    Finished,
    LlmCancelled,
    LlmHttpError,
    LlmStreamBroken,
    Message,
    ReasoningDelta,
    ScriptedProvider,
    StatusNote,
    TextDelta,
    TodoUpdate,
    ToolCall,
    ToolCallReady,
    ToolProgress,
    Usage,
)


def ask(purpose: str = "node") -> CompletionRequest:
    return CompletionRequest(messages=[Message("user", "please do the thing")], purpose=purpose)


async def chunks_of(provider: ScriptedProvider, request: CompletionRequest | None = None, **kw):
    return [chunk async for chunk in provider.stream(request or ask(), **kw)]


async def one_turn(*steps: dict, **kw) -> list:
    return await chunks_of(ScriptedProvider([list(steps)], **kw))


def body(chunks: list) -> list:
    """The chunks before the trailing Usage and Finished."""
    assert isinstance(chunks[-2], Usage) and isinstance(chunks[-1], Finished)
    return chunks[:-2]


async def test_thinking_streams_as_several_reasoning_pieces_split_on_words():
    chunks = body(await one_turn({"thinking": "first I read, then I write"}))
    assert len(chunks) == 6
    assert all(isinstance(c, ReasoningDelta) for c in chunks)
    assert "".join(c.text for c in chunks) == "first I read, then I write"


async def test_text_streams_as_text_pieces_that_join_back_to_the_text():
    chunks = body(await one_turn({"text": "  Hello,\nworld  "}))
    assert all(isinstance(c, TextDelta) for c in chunks) and len(chunks) == 2
    assert "".join(c.text for c in chunks) == "  Hello,\nworld  "


async def test_a_text_step_holding_an_object_answers_its_json_text_with_values_escaped():
    value = {"summary": 'a "quoted"\\path\nand 潮汐', "items": [1, None]}
    chunks = body(await one_turn({"text": value}))
    assert all(isinstance(c, TextDelta) for c in chunks)
    assert json.loads("".join(c.text for c in chunks)) == value


async def test_a_tool_call_is_ready_at_once_with_a_deterministic_id_and_json_arguments():
    chunks = await one_turn({"text": "let me look"}, {"tool_call": {"name": "search", "arguments": {"q": "x"}}})
    ready = [c for c in chunks if isinstance(c, ToolCallReady)]
    assert ready == [ToolCallReady(ToolCall("call_1_2", "search", '{"q":"x"}'))]
    assert chunks[-1] == Finished("tool_calls")


async def test_status_todo_and_tool_progress_steps_become_their_own_chunks():
    todos = [{"text": "read", "status": "done"}, {"text": "write", "status": "pending"}]
    chunks = body(await one_turn(
        {"status": "Reading files"},
        {"todo": todos},
        {"tool_progress": {"name": "search", "event_type": "started", "preview": "q=x"}},
    ))
    assert chunks == [
        StatusNote("Reading files"),
        TodoUpdate(todos),
        ToolProgress("search", "started", "q=x"),
    ]


async def test_clarify_ids_are_deterministic_from_the_seed():
    step = {"clarify": {"question": "Which file?", "choices": ["a.txt", "b.txt"]}}
    first = body(await one_turn(step, seed="run-1"))
    again = body(await one_turn(step, seed="run-1"))
    other = body(await one_turn(step, seed="run-2"))
    assert isinstance(first[0], ClarifyAsk)
    assert (first[0].question, first[0].choices) == ("Which file?", ["a.txt", "b.txt"])
    assert first == again
    assert first[0].clarify_id != other[0].clarify_id


async def test_every_turn_ends_with_usage_then_finished_stop():
    chunks = await one_turn({"text": "one two three"})
    assert chunks[-2] == Usage(prompt_tokens=4, completion_tokens=3)
    assert chunks[-1] == Finished("stop")


async def test_a_sleep_step_pauses_the_stream():
    started = time.monotonic()
    await one_turn({"sleep": 0.1}, {"text": "awake"})
    assert time.monotonic() - started >= 0.09


async def test_a_fail_step_raises_an_http_500_with_the_message():
    provider = ScriptedProvider([[{"text": "partial"}, {"fail": "model melted"}]])
    seen = []
    with pytest.raises(LlmHttpError) as failure:
        async for chunk in provider.stream(ask()):
            seen.append(chunk)
    assert seen == [TextDelta("partial")]
    assert failure.value.status == 500 and failure.value.is_server_error
    assert "model melted" in str(failure.value)


async def test_a_break_step_raises_stream_broken_mid_turn():
    with pytest.raises(LlmStreamBroken):
        await one_turn({"text": "half"}, {"break": True}, {"text": "never"})


async def test_a_hang_step_waits_until_cancelled():
    cancel = asyncio.Event()
    asyncio.get_running_loop().call_later(0.05, cancel.set)
    with pytest.raises(LlmCancelled):
        await chunks_of(ScriptedProvider([[{"hang": True}]]), cancel=cancel)


async def test_a_hang_step_without_a_cancel_event_lets_the_caller_time_out():
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await one_turn({"hang": True})


async def test_setting_cancel_between_chunks_stops_the_stream():
    provider = ScriptedProvider([[{"text": "one two three four"}]])
    cancel = asyncio.Event()
    seen = []
    with pytest.raises(LlmCancelled):
        async for chunk in provider.stream(ask(), cancel=cancel):
            seen.append(chunk)
            cancel.set()
    assert seen == [TextDelta("one ")]


async def test_pace_spaces_chunks_out_and_cancel_cuts_the_pause_short():
    started = time.monotonic()
    await one_turn({"text": "a b c d e"}, pace_seconds=0.02)
    assert time.monotonic() - started >= 0.09
    cancel = asyncio.Event()
    asyncio.get_running_loop().call_later(0.05, cancel.set)
    started = time.monotonic()
    with pytest.raises(LlmCancelled):
        await chunks_of(ScriptedProvider([[{"text": "slow words"}]], pace_seconds=10), cancel=cancel)
    assert time.monotonic() - started < 1


async def test_a_short_pace_notices_a_cancellation_within_one_pause():
    cancel = asyncio.Event()
    asyncio.get_running_loop().call_later(0.05, cancel.set)
    started = time.monotonic()
    with pytest.raises(LlmCancelled):
        await chunks_of(ScriptedProvider([[{"text": " ".join(["word"] * 1000)}]], pace_seconds=0.02), cancel=cancel)
    assert time.monotonic() - started < 2, "the whole turn takes 20 s: the cancellation cut it within a pause or so"


async def test_a_zero_sleep_step_lets_other_tasks_run():
    ticks = 0

    async def ticking() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    ticker = asyncio.ensure_future(ticking())
    await asyncio.sleep(0)
    seen = []
    async for _ in ScriptedProvider([[{"status": "a"}, {"sleep": 0}, {"status": "b"}]]).stream(ask()):
        seen.append(ticks)
    ticker.cancel()
    assert seen[1] > seen[0]


async def test_a_zero_sleep_step_still_stops_a_cancelled_stream():
    cancel = asyncio.Event()
    cancel.set()
    with pytest.raises(LlmCancelled):
        await chunks_of(ScriptedProvider([[{"sleep": 0}, {"text": "never"}]]), cancel=cancel)


async def test_each_call_plays_the_next_turn_and_an_exhausted_script_repeats_the_last():
    provider = ScriptedProvider([[{"text": "first"}], [{"text": "second"}]])
    texts = [(await provider.complete(ask())).text for _ in range(4)]
    assert texts == ["first", "second", "second", "second"]


async def test_the_same_script_twice_gives_the_same_chunks():
    script = [
        [{"thinking": "plan it"}, {"tool_call": {"name": "read", "arguments": {"path": "a"}}}],
        [{"clarify": {"question": "ok?", "choices": ["yes"]}}, {"text": "done"}],
    ]
    runs = []
    for _ in range(2):
        provider = ScriptedProvider(script)
        runs.append([await chunks_of(provider), await chunks_of(provider)])
    assert runs[0] == runs[1]
    assert runs[0][1][0] != runs[0][0][0]


async def test_reset_starts_the_script_over():
    provider = ScriptedProvider([[{"text": "first"}], [{"text": "second"}]])
    await provider.complete(ask())
    provider.reset()
    assert (await provider.complete(ask())).text == "first"


async def test_a_script_keyed_by_purpose_answers_planner_and_reformat_from_their_own_turns():
    provider = ScriptedProvider({
        "turns": [[{"text": "node one"}], [{"text": "node two"}]],
        "planner": [[{"text": '{"nextNodeId": "b", "reason": "b is next"}'}]],
        "reformat": [[{"text": '{"answer": 42}'}]],
    })
    assert (await provider.complete(ask())).text == "node one"
    assert (await provider.complete(ask("planner"))).text == '{"nextNodeId": "b", "reason": "b is next"}'
    assert (await provider.complete(ask("reformat"))).text == '{"answer": 42}'
    assert (await provider.complete(ask())).text == "node two"


async def test_a_purpose_without_its_own_turns_plays_the_node_turns_with_its_own_cursor():
    provider = ScriptedProvider({"turns": [[{"text": "one"}], [{"text": "two"}]]})
    assert (await provider.complete(ask())).text == "one"
    assert (await provider.complete(ask("reformat"))).text == "one"
    assert (await provider.complete(ask())).text == "two"


async def test_tool_call_ids_of_other_purposes_do_not_collide_with_node_ids():
    step = {"tool_call": {"name": "lookup", "arguments": {}}}
    provider = ScriptedProvider({"turns": [[step]], "planner": [[step]]})
    node = await provider.complete(ask())
    planner = await provider.complete(ask("planner"))
    assert node.tool_calls[0].id == "call_1_1"
    assert planner.tool_calls[0].id == "call_planner_1_1"


async def test_complete_collects_text_reasoning_tool_calls_and_usage():
    provider = ScriptedProvider([[
        {"thinking": "hmm, let me see"},
        {"status": "working"},
        {"text": "The answer is 42."},
        {"tool_call": {"name": "save", "arguments": '{"value": 42}'}},
    ]])
    completion = await provider.complete(ask())
    assert completion.text == "The answer is 42."
    assert completion.reasoning == "hmm, let me see"
    assert completion.tool_calls == [ToolCall("call_1_4", "save", '{"value": 42}')]
    assert completion.finish_reason == "tool_calls"
    assert completion.usage == Usage(prompt_tokens=4, completion_tokens=8)


async def test_a_flat_list_of_steps_is_a_single_turn_and_no_script_says_done():
    assert (await ScriptedProvider([{"text": "just this"}]).complete(ask())).text == "just this"
    assert (await ScriptedProvider().complete(ask())).text == "Done."


@pytest.mark.parametrize("script", [
    [[{"shout": "hi"}]],
    [[{"text": "a", "thinking": "b"}]],
    [[{"tool_call": {"arguments": {}}}]],
    [[{"clarify": "which?"}]],
    {"turns": [], "critic": []},
    "text",
])
def test_a_malformed_script_is_refused_when_the_provider_is_built(script):
    with pytest.raises(ValueError):
        ScriptedProvider(script)
