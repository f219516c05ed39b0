"""Workflow definitions: decoding, validation that reports every problem, graph helpers."""

import json

import pytest

from domain.errors import GraphInvalid
from domain.workflow import (
    Declaration,
    Edge,
    Planner,
    Result,
    RunLimits,
    decode_workflow,
    definition_problems,
    edge_condition,
    edges_into,
    node_by_id,
    predecessors,
    roots,
    start_nodes,
    successors,
    topological_order,
    workflow_from_dict,
    workflow_inputs,
    workflow_outputs,
)


def node(node_id: str, type_: str = "llm", **data) -> dict:
    return {"id": node_id, "type": type_, "label": node_id.title(), "data": data, "position": {"x": 0, "y": 0}}


def edge(source: str, target: str, condition: str | None = None) -> dict:
    return {"source": source, "target": target, "condition": condition}


def dag(nodes=None, edges=None, **overrides) -> dict:
    raw = {
        "name": "report-pipeline",
        "displayName": "报告流水线",
        "description": "Research then write.",
        "mode": "DAG",
        "nodes": nodes if nodes is not None else [
            node("input", "userInput", inputs=[{"name": "topic", "type": "string", "required": True, "description": "主题"}]),
            node("research", "agent", outputs=[{"name": "summary", "required": True}]),
            node("write", "llm"),
            node("done", "output", outputs=[{"name": "report", "type": "string", "description": "正文", "value": "{{write}}"}]),
        ],
        "edges": edges if edges is not None else [
            edge("input", "research"), edge("research", "write", '{{research.summary}} exists'), edge("write", "done"),
        ],
    }
    raw.update(overrides)
    return raw


def problems_of(raw: dict) -> list[str]:
    return [problem.message for problem in definition_problems(raw)]


def listed(raw: dict) -> list[str]:
    return [str(problem) for problem in definition_problems(raw)]


def test_a_sound_dag_has_no_problems():
    assert problems_of(dag()) == []


def test_the_wire_format_is_camel_case_and_unknown_canvas_keys_are_ignored():
    defn = decode_workflow(json.dumps(dag(startNodeId="input", limits={"maxVisitsPerNode": 5})))
    assert defn.display_name == "报告流水线" and defn.start_node_id == "input"
    assert defn.limits == RunLimits(max_visits_per_node=5, max_visits_per_run=200)
    assert defn.edges[1] == Edge("research", "write", "{{research.summary}} exists")


def test_limits_default_to_the_product_caps():
    assert workflow_from_dict(dag()).limits == RunLimits(50, 200)


@pytest.mark.parametrize(
    "raw, message",
    [
        (b'{"name": "x",', "workflow definition is malformed: Input data was truncated"),
        (json.dumps(dag(mode="PIPELINE")), "Invalid enum value 'PIPELINE' - at `$.mode`"),
        (json.dumps(dag(nodes=[{"id": 1, "type": "llm"}])), "Expected `str`, got `int` - at `$.nodes[0].id`"),
        (json.dumps({"name": "x", "mode": "DAG", "nodes": []}), "Object missing required field `displayName`"),
        (json.dumps(dag(limits={"maxVisitsPerRun": 500})), "Expected `int` <= 200 - at `$.limits.maxVisitsPerRun`"),
    ],
)
def test_decoding_errors_carry_msgspecs_precise_message_as_graph_invalid(raw, message):
    with pytest.raises(GraphInvalid) as caught:
        decode_workflow(raw)
    assert caught.value.code == "GRAPH_INVALID" and message in caught.value.problems[0]


def test_converting_an_object_reports_the_same_precise_messages():
    with pytest.raises(GraphInvalid, match=r"Expected `array`, got `str` - at `\$.edges`"):
        workflow_from_dict(dag(edges="none"))


@pytest.mark.parametrize("name", ["Report", "report_pipeline", "-report", "report-", "report--pipeline", "报告", ""])
def test_a_name_that_is_not_kebab_case_is_a_problem(name):
    assert listed(dag(name=name)) == ["$.name: Expected `str` matching regex '^[a-z0-9]+(-[a-z0-9]+)*$'"]


def test_a_name_longer_than_64_characters_is_a_problem():
    assert listed(dag(name="a" * 65)) == ["$.name: Expected `str` of length <= 64"]
    assert problems_of(dag(name="a" * 64)) == []


def test_an_empty_display_name_is_a_problem():
    assert problems_of(dag(displayName="  ")) == ["displayName must not be empty"]


def test_an_unknown_node_type_is_a_problem():
    raw = dag()
    raw["nodes"][2]["type"] = "webhook"
    assert listed(raw) == [
        "$.nodes[2].type: unknown type 'webhook' (expected one of userInput, llm, agent, smartAction, output)"
    ]


def test_duplicate_node_ids_are_a_problem():
    raw = dag()
    raw["nodes"].append(node("write", "llm"))
    assert "node id 'write' is used by 2 nodes" in problems_of(raw)


@pytest.mark.parametrize("node_id", ["", "a.b", "two words", "{x}"])
def test_a_node_id_unusable_in_references_is_a_problem(node_id):
    raw = dag(nodes=[node("input", "userInput"), node(node_id, "output")], edges=[edge("input", node_id)])
    assert problems_of(raw) == [f"node id {node_id!r} must be non-empty with no '.', braces or whitespace"]


def test_an_edge_with_an_unknown_source_or_target_names_the_edge():
    raw = dag()
    raw["edges"] += [edge("ghost", "done"), edge("write", "nowhere")]
    problems = problems_of(raw)
    assert "edge #3 (ghost -> done) has unknown source 'ghost'" in problems
    assert "edge #4 (write -> nowhere) has unknown target 'nowhere'" in problems


def test_a_self_loop_is_a_problem_in_dag_mode():
    raw = dag()
    raw["edges"].append(edge("write", "write"))
    assert problems_of(raw) == ["edge #3 (write -> write) is a self-loop, which DAG mode does not allow"]


def test_a_cycle_in_dag_mode_names_its_nodes():
    raw = dag()
    raw["edges"].append(edge("done", "research"))
    assert problems_of(raw) == ["cycle in DAG mode: research -> write -> done -> research"]


def test_two_separate_cycles_are_both_reported():
    raw = dag()
    raw["nodes"] += [node("a"), node("b")]
    raw["edges"] += [edge("write", "research"), edge("input", "a"), edge("a", "b"), edge("b", "a")]
    cycles = [problem for problem in problems_of(raw) if problem.startswith("cycle")]
    assert cycles == ["cycle in DAG mode: research -> write -> research", "cycle in DAG mode: a -> b -> a"]


def test_a_dag_where_every_node_has_an_incoming_edge_has_no_start():
    raw = dag(nodes=[node("a"), node("b", "output")], edges=[edge("a", "b"), edge("b", "a")])
    problems = problems_of(raw)
    assert "DAG has no start: every node has an incoming edge" in problems
    assert "cycle in DAG mode: a -> b -> a" in problems


def test_nodes_not_reachable_from_the_roots_are_a_problem():
    raw = dag()
    raw["nodes"] += [node("x"), node("y")]
    raw["edges"] += [edge("x", "y"), edge("y", "x")]
    problems = problems_of(raw)
    assert "node 'x' is unreachable from the start node(s) input" in problems
    assert "node 'y' is unreachable from the start node(s) input" in problems


def test_a_workflow_without_an_output_node_is_a_problem():
    raw = dag(nodes=[node("input", "userInput"), node("write")], edges=[edge("input", "write")])
    assert problems_of(raw) == ["workflow has no output node"]


def test_a_workflow_without_nodes_is_a_problem():
    assert problems_of(dag(nodes=[], edges=[])) == ["workflow has no nodes", "workflow has no output node"]


def test_an_invalid_condition_names_the_edge_and_the_syntax_error():
    raw = dag()
    raw["edges"][1]["condition"] = "{{research.summary}} == approve"
    [problem] = problems_of(raw)
    assert problem.startswith("edge #1 (research -> write) has an invalid condition: unexpected word 'approve'")


def test_malformed_output_declarations_and_retry_counts_on_model_nodes_are_problems():
    raw = dag()
    raw["nodes"][1]["data"] = {"outputs": [{"name": "s", "type": "text"}], "runtimeMaxRetries": -1}
    assert listed(raw) == [
        "$.nodes[1].data.outputs[0].type: Invalid enum value 'text'",
        "$.nodes[1].data.runtimeMaxRetries: Expected `int` >= 0",
    ]


def test_malformed_input_and_output_node_declarations_are_problems():
    raw = dag()
    raw["nodes"][0]["data"] = {"inputs": [{"type": "string"}]}
    raw["nodes"][3]["data"] = {"outputs": {"report": "x"}}
    assert listed(raw) == [
        "$.nodes[0].data.inputs[0]: Object missing required field `name`",
        "$.nodes[3].data.outputs: Expected `array`, got `object`",
    ]


def test_every_problem_is_reported_at_once():
    raw = dag(name="Bad Name", displayName="")
    raw["nodes"][2]["type"] = "webhook"
    raw["edges"] += [edge("write", "ghost"), edge("done", "done", "==")]
    assert len(problems_of(raw)) == 6


def test_a_name_that_does_not_decode_still_has_the_rest_of_the_definition_checked():
    assert listed(dag(name="Bad", displayName="")) == [
        "$.name: Expected `str` matching regex '^[a-z0-9]+(-[a-z0-9]+)*$'", "$.displayName: displayName must not be empty",
    ]


# AGENTIC mode.

def agentic(**overrides) -> dict:
    raw = dag(mode="AGENTIC", edges=[edge("input", "research"), edge("research", "research"), edge("write", "research")])
    raw.update(overrides)
    return raw


def test_agentic_mode_allows_self_loops_cycles_and_nodes_without_edges():
    raw = agentic()
    assert problems_of(raw) == []
    assert start_nodes(workflow_from_dict(raw)) == ["input"]


def test_agentic_mode_starts_at_start_node_id_when_set():
    assert start_nodes(workflow_from_dict(agentic(startNodeId="research"))) == ["research"]


def test_agentic_start_node_id_must_exist():
    assert problems_of(agentic(startNodeId="ghost")) == ["startNodeId 'ghost' is not a node of the workflow"]


def test_agentic_mode_without_start_node_id_needs_exactly_one_user_input_node():
    raw = agentic()
    raw["nodes"].append(node("input2", "userInput"))
    assert problems_of(raw) == ["AGENTIC mode needs startNodeId or exactly one userInput node (found 2)"]
    assert problems_of(agentic(startNodeId="input", nodes=raw["nodes"])) == []


# Graph helpers.

def test_predecessors_and_successors_follow_edge_order_without_duplicates():
    raw = dag()
    raw["nodes"].append(node("review"))
    raw["edges"] += [edge("input", "review"), edge("review", "done"), edge("input", "review")]
    defn = workflow_from_dict(raw)
    assert predecessors(defn, "done") == ["write", "review"]
    assert successors(defn, "input") == ["research", "review"]
    assert predecessors(defn, "input") == []


def test_edges_into_gives_the_conditions_on_incoming_edges():
    defn = workflow_from_dict(dag())
    assert [e.condition for e in edges_into(defn, "write")] == ["{{research.summary}} exists"]


def test_node_by_id_finds_a_node_or_none():
    defn = workflow_from_dict(dag())
    assert node_by_id(defn, "write").type == "llm" and node_by_id(defn, "nope") is None


def test_topological_order_puts_every_edge_forward_with_ties_in_node_order():
    raw = dag(
        nodes=[node("d", "output"), node("b"), node("a", "userInput"), node("c")],
        edges=[edge("a", "b"), edge("a", "c"), edge("c", "d"), edge("b", "d")],
    )
    assert topological_order(workflow_from_dict(raw)) == ["a", "b", "c", "d"]


def test_topological_order_refuses_a_cycle():
    raw = dag()
    raw["edges"].append(edge("write", "research"))
    with pytest.raises(GraphInvalid, match="cycle in DAG mode: research -> write -> research"):
        topological_order(workflow_from_dict(raw))


def test_roots_are_the_dag_start_nodes():
    raw = dag()
    raw["nodes"].append(node("side", "smartAction"))
    raw["edges"].append(edge("side", "done"))
    defn = workflow_from_dict(raw)
    assert roots(defn) == start_nodes(defn) == ["input", "side"]


def test_workflow_inputs_come_from_user_input_nodes():
    assert workflow_inputs(workflow_from_dict(dag())) == [Declaration("topic", "string", True, "主题")]


def test_workflow_outputs_come_from_output_nodes_without_their_value_templates():
    assert workflow_outputs(workflow_from_dict(dag())) == [Result("report", "string", "正文", "{{write}}")]


def test_a_name_declared_twice_is_listed_once_first_declaration_winning():
    raw = dag()
    raw["nodes"].append(node("input2", "userInput", inputs=[{"name": "topic", "type": "number"}, {"name": "lang"}]))
    assert [(i.name, i.type) for i in workflow_inputs(workflow_from_dict(raw))] == [("topic", "string"), ("lang", "string")]


def test_malformed_references_anywhere_in_node_data_are_problems_with_their_location():
    raw = dag()
    raw["nodes"][2]["data"] = {"prompt": "Write {{research summary}}", "messages": [{"content": "{{}}"}]}
    assert listed(raw) == [
        "$.nodes[2].data.messages: unknown field",
        "$.nodes[2].data.prompt: malformed reference path 'research summary': use dotted names like node.field or items.0",
        "$.nodes[2].data.messages[0].content: malformed reference path '': use dotted names like node.field or items.0",
    ]


def test_a_blank_edge_condition_means_no_condition():
    raw = dag()
    raw["edges"][2]["condition"] = "  "
    defn = workflow_from_dict(raw)
    assert problems_of(raw) == []
    assert edge_condition(defn.edges[2]) is None
    assert edge_condition(defn.edges[1]) is not None


def planned(**overrides) -> dict:
    return dag(mode="AGENTIC", edges=[], **overrides)


def test_planner_settings_are_part_of_the_definition_with_defaults():
    assert workflow_from_dict(planned()).planner == Planner(model_id=None, prompt="", script=None)
    script = [[{"text": '{"nextNodeId": null, "reason": "done"}'}]]
    defn = workflow_from_dict(planned(planner={"model_id": "scripted", "prompt": "Be brief.", "script": script}))
    assert defn.planner == Planner(model_id="scripted", prompt="Be brief.", script=script)


@pytest.mark.parametrize("planner, message", [
    ("fast", "$.planner: Expected `object`, got `str`"),
    ({"model_id": 5}, "$.planner.model_id: Expected `str | null`, got `int`"),
    ({"prompt": ["a"]}, "$.planner.prompt: Expected `str`, got `array`"),
    ({"script": "turn"}, "$.planner.script: Expected `array | null`, got `str`"),
])
def test_malformed_planner_settings_are_refused_at_publication_saying_where(planner, message):
    assert listed(planned(planner=planner)) == [message]


def test_a_blank_planner_model_is_a_problem():
    assert problems_of(planned(planner={"model_id": " "})) == [
        "planner.model_id must name a model (leave it out for the default model)"
    ]
