"""The context API's contract: one set of names, routes, bodies and fields for its server and its tools."""

from __future__ import annotations

from engine.context.contract import (
    ANSWER_FIELDS,
    ITEM_FIELDS,
    META_ROUTE,
    OUTPUT_ROUTE,
    PATH_ROUTE,
    ContextAnswer,
    MetaQuery,
    OutputQuery,
    PathQuery,
    success,
)
from projections.payloads import NodeOutput
from projections.wire import encode


def test_the_tools_send_camel_case_bodies_with_every_field_even_when_null():
    assert encode(PathQuery("r1", "v1")) == b'{"runId":"r1","visitUuid":"v1"}'
    assert encode(OutputQuery("r1", "B")) == b'{"runId":"r1","nodeId":"B","field":null,"iterSeq":null}'
    assert encode(MetaQuery("r1", None, "B", "ALL", 2)) == (
        b'{"runId":"r1","visitUuid":null,"nodeId":"B","kind":"ALL","iterSeq":2}'
    )


def test_the_fields_a_tool_may_read_are_the_fields_of_the_answers():
    assert ANSWER_FIELDS[PATH_ROUTE] == ("visitUuids", "nodeIds", "paths", "backtrackEdgeKeys", "truncated")
    assert ANSWER_FIELDS[OUTPUT_ROUTE] == (
        "nodeId", "iterSeq", "visitUuid", "status", "message", "data", "requestedField",
    )
    assert ANSWER_FIELDS[META_ROUTE] == ("nodeId", "iterSeq", "visitUuid", "thinking", "toolCalls", "todoList", "logs")
    assert ITEM_FIELDS == {
        "paths": ("sequence", "visitUuids", "hasBacktrack"),
        "toolCalls": ("tool", "args", "result"),
        "logs": ("type", "message", "detail", "timestamp"),
    }


def test_every_answer_is_code_message_data_with_the_http_status_as_its_code():
    body = NodeOutput(node_id="B", iter_seq=1, visit_uuid="b", status=200, message="ok", data=None, requested_field=None)
    assert encode(success(body)).startswith(b'{"code":200,"message":"success","data":{"nodeId":"B",')
    assert encode(ContextAnswer(403, "run mismatch")) == b'{"code":403,"message":"run mismatch","data":null}'
