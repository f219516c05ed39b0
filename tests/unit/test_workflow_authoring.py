"""Authoring feedback: the JSON Schema, every problem of a definition at its JSON path, run variables."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from domain.workflow import (
    InvalidVariables,
    WorkflowDefinition,
    check_variables,
    definition_form,
    definition_problems,
    duplicate_names,
    workflow_from_dict,
    workflow_json_schema,
    workflow_schema_text,
)

ROOT = Path(__file__).resolve().parents[2]
DEMOS = sorted((ROOT / "engine" / "demos").glob("*.json"))

REPORT: dict[str, Any] = {
    "name": "report-pipeline",
    "displayName": "报告流水线",
    "mode": "DAG",
    "nodes": [
        {"id": "input", "type": "userInput", "data": {"inputs": [
            {"name": "topic", "type": "string", "required": True},
            {"name": "depth", "type": "number"},
            {"name": "tags", "type": "array"},
        ]}},
        {"id": "research", "type": "agent", "data": {"prompt": "Research {{topic}}", "model_id": "scripted"}},
        {"id": "write", "type": "llm", "data": {"prompt": "Write up {{research.text}} at depth {{depth}}"}},
        {"id": "done", "type": "output", "data": {"outputs": [{"name": "report", "value": "{{write.text}}"}]}},
    ],
    "edges": [
        {"source": "input", "target": "research"},
        {"source": "research", "target": "write", "condition": "{{research.text}} exists"},
        {"source": "write", "target": "done"},
    ],
}


def changed(**paths) -> dict:
    """REPORT with node data keys set: `changed(write={"promt": "x"})`."""
    raw = copy.deepcopy(REPORT)
    for node_id, data in paths.items():
        node = next(node for node in raw["nodes"] if node["id"] == node_id)
        node["data"].update(data)
    return raw


def listed(raw, **options) -> list[str]:
    return [str(problem) for problem in definition_problems(raw, **options)]


def test_a_sound_definition_and_every_demo_have_no_problems():
    assert listed(REPORT, model_ids=["scripted"]) == []
    for path in DEMOS:
        assert listed(json.loads(path.read_text(encoding="utf-8")), model_ids=["scripted"]) == [], path.name


def test_a_typo_in_node_data_is_an_unknown_field_at_its_json_path():
    assert listed(changed(write={"promt": "hello"})) == ["$.nodes[2].data.promt: unknown field"]


def test_unknown_keys_at_every_level_are_all_listed_not_just_the_first():
    raw = changed(write={"promt": "x", "temprature": 1})
    raw["colour"] = "blue"
    raw["edges"][0]["weight"] = 2
    raw["nodes"][0]["data"]["inputs"][0]["requried"] = True
    assert listed(raw) == [
        "$.nodes[0].data.inputs[0].requried: unknown field",
        "$.nodes[2].data.promt: unknown field",
        "$.nodes[2].data.temprature: unknown field",
        "$.edges[0].weight: unknown field",
        "$.colour: unknown field",
    ]


def test_a_value_of_the_wrong_type_carries_msgspecs_message_at_its_path():
    raw = changed(write={"maxIterations": 0})
    raw["nodes"][0]["data"]["inputs"][0]["type"] = "text"
    assert listed(raw) == [
        "$.nodes[0].data.inputs[0].type: Invalid enum value 'text'",
        "$.nodes[2].data.maxIterations: Expected `int` >= 1",
    ]


def test_an_unknown_node_type_names_the_types_there_are():
    raw = copy.deepcopy(REPORT)
    raw["nodes"][2]["type"] = "webhook"
    assert listed(raw)[0] == (
        "$.nodes[2].type: unknown type 'webhook' (expected one of userInput, llm, agent, smartAction, output)"
    )


def test_a_node_without_a_type_is_one_problem_at_the_node():
    raw = copy.deepcopy(REPORT)
    del raw["nodes"][2]["type"]
    assert listed(raw) == ["$.nodes[2]: Object missing required field `type`"]


def test_canvas_positions_and_a_schema_reference_are_allowed():
    raw = copy.deepcopy(REPORT)
    raw["$schema"] = "http://127.0.0.1:2438/api/v1/schemas/workflow.json"
    raw["nodes"][0]["position"] = {"x": 10, "y": 20.5}
    assert listed(raw) == []


def test_a_reference_to_a_node_that_does_not_exist_is_a_problem():
    assert listed(changed(write={"prompt": "{{reserch.text}}"})) == [
        "$.nodes[2].data.prompt: {{reserch.text}} refers to 'reserch': no node has that id and no userInput node "
        "declares it (declared: topic, depth, tags)",
    ]


def test_a_reference_to_a_node_that_runs_later_or_to_the_node_itself_is_a_problem():
    assert listed(changed(research={"prompt": "{{write.text}} and {{research.text}}"})) == [
        "$.nodes[1].data.prompt: {{write.text}} refers to node 'write', which does not run before node 'research'",
        "$.nodes[1].data.prompt: {{research.text}} refers to node 'research' itself, whose output does not exist "
        "while it runs",
    ]


def test_an_undeclared_variable_in_a_script_an_output_default_or_a_condition_is_a_problem():
    raw = changed(research={"script": [[{"text": "about {{subject}}"}]]})
    raw["nodes"][3]["data"]["outputs"].append({"name": "summary"})
    raw["edges"][2]["condition"] = "{{verdict}} == 'ok'"
    assert [problem.split(":")[0] for problem in listed(raw)] == [
        "$.nodes[1].data.script[0][0].text", "$.nodes[3].data.outputs[1]", "$.edges[2].condition",
    ]


def test_uploaded_files_and_declared_variables_may_be_referenced_anywhere():
    assert listed(changed(write={"prompt": "{{uploadedFiles}} {{topic}} {{tags.0}} {{input.topic}}"})) == []


def test_in_agentic_mode_any_node_may_be_referenced_by_any_other():
    raw = changed(research={"prompt": "revise {{write.text}}"})
    raw["mode"] = "AGENTIC"
    assert listed(raw) == []


def test_model_ids_that_are_not_configured_are_problems_when_the_models_are_known():
    raw = changed(write={"model_id": "gpt-9", "reformat_model_id": "scripted"})
    raw["mode"], raw["planner"] = "AGENTIC", {"model_id": "planner-x"}
    assert listed(raw, model_ids=["scripted", "local"]) == [
        "$.nodes[2].data.model_id: model 'gpt-9' is not configured (configured: scripted, local)",
        "$.planner.model_id: model 'planner-x' is not configured (configured: scripted, local)",
    ]
    assert listed(raw) == []


def test_the_graph_rules_come_with_paths_too():
    raw = copy.deepcopy(REPORT)
    raw["edges"].append({"source": "write", "target": "ghost"})
    raw["nodes"][2]["id"] = "research"
    problems = listed(raw)
    assert "$.nodes[2].id: node id 'research' is used by 2 nodes" in problems
    assert "$.edges[3].target: edge #3 (write -> ghost) has unknown target 'ghost'" in problems


def test_a_document_that_is_not_an_object_is_one_problem():
    assert listed([1, 2]) == ["$: Expected `object`, got `array`"]
    assert listed({"name": "x"}) == [
        "$: Object missing required field `displayName`", "$: Object missing required field `mode`",
        "$: Object missing required field `nodes`",
    ]


def test_two_sources_with_one_name_are_each_a_problem_naming_the_other():
    assert duplicate_names([("a.json", "x"), ("b.json", "y"), ("c.json", "x")]) == {
        "a.json": "$.name: workflow name 'x' is also used by c.json",
        "c.json": "$.name: workflow name 'x' is also used by a.json",
    }


def test_the_canonical_form_ignores_key_order_defaults_spelled_out_and_the_schema_reference():
    spelled = copy.deepcopy(REPORT)
    spelled["edges"][0]["condition"] = None
    spelled["limits"] = {"maxVisitsPerNode": 50, "maxVisitsPerRun": 200}
    spelled["$schema"] = "workflow.schema.json"
    spelled["nodes"][1]["data"]["tools"] = []
    reordered = dict(reversed(list(spelled.items())))
    assert definition_form(reordered) == definition_form(REPORT) != ""
    assert definition_form(changed(write={"prompt": "other"})) != definition_form(REPORT)
    assert definition_form(changed(write={"promt": "x"})) == ""


def test_the_committed_schema_is_the_generated_one():
    assert (ROOT / "docs" / "workflow.schema.json").read_bytes() == workflow_schema_text()


def test_the_schema_refuses_unknown_keys_and_discriminates_nodes_by_type():
    schema = workflow_json_schema()
    defs = schema["$defs"]
    assert schema["$ref"] == "#/$defs/WorkflowDefinition"
    assert all(d.get("additionalProperties") is False for name, d in defs.items() if name != "Position")
    nodes = defs["WorkflowDefinition"]["properties"]["nodes"]["items"]
    assert set(nodes["discriminator"]["mapping"]) == {"userInput", "llm", "agent", "smartAction", "output"}
    assert "promt" not in defs["ModelData"]["properties"] and "prompt" in defs["ModelData"]["properties"]


def test_every_demo_decodes_as_an_authoring_document():
    for path in DEMOS:
        msgspec.json.decode(path.read_bytes(), type=WorkflowDefinition)


DEFN = workflow_from_dict(REPORT)


def test_variables_with_every_required_input_of_its_declared_type_pass():
    check_variables(DEFN, {"topic": "tides", "depth": 2.5, "tags": ["a"], "undeclared": object()})


@pytest.mark.parametrize("variables", [{}, {"topic": None}, {"topic": ""}])
def test_a_missing_required_input_is_refused_naming_it(variables):
    with pytest.raises(InvalidVariables) as caught:
        check_variables(DEFN, variables)
    assert caught.value.code == "VALIDATION_FAILED"
    assert caught.value.message == "variables: missing required input(s): topic"


def test_values_of_the_wrong_declared_type_are_each_named():
    with pytest.raises(InvalidVariables) as caught:
        check_variables(DEFN, {"topic": 3, "depth": True, "tags": "a,b"})
    assert caught.value.problems == [
        "'topic' must be of type string, got number",
        "'depth' must be of type number, got boolean",
        "'tags' must be of type array, got string",
    ]
