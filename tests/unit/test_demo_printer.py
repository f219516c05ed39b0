"""`flowtrail demo` prints thinking a sentence at a time, each visit's apart, even when visits run in parallel."""

from __future__ import annotations

import pytest

from scripts.demo import StreamPrinter


def thinking(visit: str, node: str, content: str) -> dict:
    return {"type": "node_stream", "kind": "thinking", "nodeId": node, "visitUuid": visit, "content": content}


def printed(capsys: pytest.CaptureFixture[str], messages: list[tuple[str, dict]]) -> list[str]:
    printer = StreamPrinter()
    for position, (event, data) in enumerate(messages, start=1):
        printer.show(str(position), event, data)
    printer.finish()
    return capsys.readouterr().out.splitlines()


def test_two_parallel_visits_thinking_word_by_word_print_one_line_per_sentence_each(capsys):
    lines = printed(capsys, [
        ("node_stream", thinking("v1", "summary", "Two ")),
        ("node_status", {"type": "node_status", "nodeId": "key-points", "visitUuid": "v2", "status": "RUNNING",
                         "nodeType": "llm", "nodeLabel": "Key points"}),
        ("node_stream", thinking("v1", "summary", "sentences: what it ")),
        ("node_stream", thinking("v2", "key-points", "First, ")),
        ("node_stream", thinking("v1", "summary", "is, and what is ")),
        ("node_stream", thinking("v2", "key-points", "what did the research ")),
        ("node_stream", thinking("v1", "summary", "new.")),
        ("node_stream", thinking("v2", "key-points", "visit find? I will ask.")),
    ])
    assert lines == [
        "    2 [key-points] RUNNING (llm: Key points)",
        "    1 [summary] thinking: Two sentences: what it is, and what is new.",
        "    4 [key-points] thinking: First, what did the research visit find? I will ask.",
    ]


def test_thinking_cut_short_by_its_visits_next_message_is_printed_before_it(capsys):
    lines = printed(capsys, [
        ("node_stream", thinking("v1", "research", "I will search\nfor ")),
        ("node_stream", {"type": "node_stream", "kind": "tool_call", "nodeId": "research", "visitUuid": "v1",
                         "toolName": "web_search", "content": "{}"}),
        ("node_stream", thinking("v1", "research", "Enough")),
    ])
    assert lines == [
        "    1 [research] thinking: I will search for",
        "    2 [research] tool_call web_search: {}",
        "    3 [research] thinking: Enough",
    ]
