"""Stored kind, mode, node-type and purpose fields take only the model's values, and decisions refuse any other."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import msgspec
import pytest

from domain import events as ev
from domain import run as decide
from domain.errors import IllegalTransition
from domain.vocabulary import MODEL_CALL_PURPOSES, NODE_TYPES, RUN_MODES, STREAM_KINDS
from domain.workflow import WorkflowDefinition

AT = datetime(2026, 7, 1, tzinfo=UTC)
FLOW: dict[str, Any] = dict(workflow_id=1, workflow_name="demo", workflow_version=1, display_name="Demo")


def running():
    run = decide.evolve(None, decide.create_run(uuid4(), AT, mode="DAG", **FLOW))
    return decide.evolve(run, decide.start_run(run, AT))


def test_the_seeds_eight_stream_kinds_are_the_ones_a_node_streamed_may_carry():
    assert STREAM_KINDS == ("thinking", "status", "step", "tool_progress", "tool_call", "tool_result",
                            "todo_update", "clarify_request")


def values_of(struct: type, field: str) -> set[str]:
    info = msgspec.inspect.type_info(struct)
    assert isinstance(info, msgspec.inspect.StructType)
    literal = next(f.type for f in info.fields if f.name == field)
    assert isinstance(literal, msgspec.inspect.LiteralType)
    return {str(value) for value in literal.values}


def test_a_workflow_and_its_runs_share_one_set_of_modes_and_node_types():
    assert values_of(WorkflowDefinition, "mode") == values_of(ev.RunCreated, "mode") == set(RUN_MODES)
    assert values_of(ev.VisitStarted, "node_type") == values_of(ev.VisitSkipped, "node_type") == set(NODE_TYPES)
    assert set(NODE_TYPES) == {"userInput", "llm", "agent", "smartAction", "output"}
    assert values_of(ev.NodeStreamed, "kind") == set(STREAM_KINDS)


def test_a_run_of_an_unknown_mode_is_refused():
    mode: Any = "PIPELINE"
    with pytest.raises(IllegalTransition, match="unknown run mode 'PIPELINE'"):
        decide.create_run(uuid4(), AT, mode=mode, **FLOW)


def test_a_visit_of_an_unknown_node_type_is_refused_whether_started_or_skipped():
    with pytest.raises(IllegalTransition, match="unknown node type 'webhook'"):
        decide.start_visit(running(), AT, visit_uuid="v1", node_id="n", node_type="webhook", node_label="N",
                      iter_seq=1, sort_order=1)
    with pytest.raises(IllegalTransition, match="unknown node type 'webhook'"):
        decide.skip_visit(running(), AT, visit_uuid="v1", node_id="n", node_type="webhook", node_label="N",
                     iter_seq=1, sort_order=1)


def test_a_stored_event_with_a_value_outside_its_vocabulary_does_not_decode():
    event = ev.NodeStreamed(originator_id=uuid4(), originator_version=3, timestamp=AT, visit_uuid="v1",
                            node_id="n", kind="thinking", content="x")
    raw = msgspec.json.encode(event).replace(b'"thinking"', b'"shouting"')
    with pytest.raises(msgspec.ValidationError, match="kind"):
        msgspec.json.decode(raw, type=ev.NodeStreamed)


def test_a_model_call_is_for_a_node_a_reformat_or_the_planner_and_nothing_else_decodes():
    assert values_of(ev.ModelCalled, "purpose") == set(MODEL_CALL_PURPOSES) == {"node", "reformat", "planner"}
    event = ev.ModelCalled(originator_id=uuid4(), originator_version=3, timestamp=AT, visit_uuid="v1", node_id="n",
                           model_id="m", purpose="reformat", attempt=1, latency_ms=1.0)
    raw = msgspec.json.encode(event).replace(b'"reformat"', b'"chat"')
    with pytest.raises(msgspec.ValidationError, match="purpose"):
        msgspec.json.decode(raw, type=ev.ModelCalled)
