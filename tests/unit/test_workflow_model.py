"""The one typed workflow model: recorded versions keep decoding, node settings are read as attributes."""

from __future__ import annotations

import copy

import msgspec
import pytest

from domain.errors import GraphInvalid
from domain.workflow.declarations import Declaration, Result, of_type
from domain.workflow.definition import Planner, workflow_from_dict
from domain.workflow.nodes import AgentNode, ModelData, OutputNode, SmartActionData
from domain.workflow.recorded import recorded_definition

RECORDED = {
    "name": "old-flow", "displayName": "Old", "mode": "DAG",
    "nodes": [
        {"id": "ask", "type": "agent", "data": {"prompt": "Hi", "maxIterations": "5", "tools": "read_file", "askUser": True}},
        {"id": "done", "type": "output", "data": {"outputs": [{"name": "text", "value": None}, {"name": "echo"}]}},
    ],
    "edges": [{"source": "ask", "target": "done"}],
}


def test_a_recorded_node_setting_that_no_longer_decodes_takes_its_default_and_the_rest_is_kept():
    with pytest.raises(GraphInvalid):
        workflow_from_dict(RECORDED)
    node = recorded_definition(RECORDED).nodes[0]
    assert isinstance(node, AgentNode) and node.type == "agent"
    assert node.data == ModelData(prompt="Hi", ask_user=True)


def test_recorded_planner_settings_that_do_not_decode_take_the_defaults():
    raw = {**copy.deepcopy(RECORDED), "mode": "AGENTIC", "planner": {"model_id": 5}}
    assert recorded_definition(raw).planner == Planner()


def test_any_other_flaw_of_a_recorded_definition_is_still_refused():
    with pytest.raises(GraphInvalid):
        recorded_definition({**RECORDED, "mode": "PIPELINE"})


def test_a_result_without_a_value_stands_for_its_name_and_an_explicit_null_stays_null():
    node = recorded_definition(RECORDED).nodes[1]
    assert isinstance(node, OutputNode)
    assert [result.template for result in node.data.outputs] == [None, "{{echo}}"]
    assert node.data.outputs[1] == Result("echo")


def test_a_smart_actions_bare_ids_and_described_actions_are_one_list_of_choices():
    data = msgspec.convert({"actions": ["short", {"id": "long", "description": "in depth"}]}, SmartActionData)
    assert [(choice.id, choice.description) for choice in data.choices] == [("short", ""), ("long", "in depth")]


def test_each_visit_of_a_node_can_have_its_own_script_and_the_last_repeats():
    data = ModelData(scripts=["first", "second"], script="ignored")
    assert [data.visit_script(n) for n in (1, 2, 3)] == ["first", "second", "second"]
    assert ModelData(script="only").visit_script(5) == "only"


@pytest.mark.parametrize(("value", "declared", "accepted"), [
    (1, "number", True), (True, "number", False), (True, "boolean", True), ("x", "filePath", True),
    ([], "array", True), ({}, "array", False), ({}, "object", True), (1.5, "string", False),
])
def test_one_map_says_which_json_values_a_declared_type_accepts(value, declared, accepted):
    assert of_type(value, declared) is accepted


def test_a_declaration_reads_positionally_as_name_type_required_description():
    assert Declaration("topic", "string", True, "主题") == Declaration(name="topic", required=True, description="主题")
