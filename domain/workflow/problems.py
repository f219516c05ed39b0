"""Everything wrong with a workflow definition at once, each problem at its JSON path, in one pass.

The document is walked along the workflow model (every unknown key, every value msgspec
refuses, with its own message); when it decodes, the rules a type cannot say follow: names and
ids, the graph, declared names, template references that cannot resolve where they stand, and
model ids that are not configured. Pure: the caller says which models exist.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

import msgspec

from domain.canonical import canonical_digest
from domain.templates import SEGMENT
from domain.workflow.definition import WorkflowDefinition, edge_condition, roots
from domain.workflow.graph import cycle_messages, reachable
from domain.workflow.nodes import AnyNode, ModelData, OutputNode, SmartActionNode, UserInputNode
from domain.workflow.recorded import recorded_form
from domain.workflow.references import node_path, reference_problems
from domain.workflow.structure import Problem, structure_problems

NODE_ID_RE = re.compile(rf"^{SEGMENT}$")


def declared_name_problems(names: list[str]) -> list[str]:
    """What is wrong with the names a model node declares for its answer: an empty one, one used twice."""
    problems = []
    if any(not name.strip() for name in names):
        problems.append("invalid outputs declaration: a field has an empty name")
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        problems.append(f"invalid outputs declaration: duplicate field name(s) {', '.join(duplicates)}")
    return problems


def _node_problems(index: int, node: AnyNode) -> list[Problem]:
    problems: list[Problem] = []
    if isinstance(node.data, ModelData):
        names = [field.name for field in node.data.outputs]
        at = node_path(index, "data.outputs")
        problems += [Problem(at, f"node {node.id!r}: {problem}") for problem in declared_name_problems(names)]
    if isinstance(node, SmartActionNode) and not node.data.actions:
        problems.append(Problem(node_path(index, "data.actions"), f"smartAction node {node.id!r} needs at least one action"))
    return problems


def _id_problems(defn: WorkflowDefinition) -> list[Problem]:
    problems: list[Problem] = []
    ids = [node.id for node in defn.nodes]
    for node_id in dict.fromkeys(ids):
        if ids.count(node_id) > 1:
            second = ids.index(node_id, ids.index(node_id) + 1)
            problems.append(Problem(node_path(second, "id"), f"node id {node_id!r} is used by {ids.count(node_id)} nodes"))
        if not NODE_ID_RE.match(node_id):
            problems.append(Problem(
                node_path(ids.index(node_id), "id"), f"node id {node_id!r} must be non-empty with no '.', braces or whitespace",
            ))
    return problems


def _edge_problems(defn: WorkflowDefinition) -> list[Problem]:
    problems: list[Problem] = []
    ids = {node.id for node in defn.nodes}
    for index, edge in enumerate(defn.edges):
        at, name = f"$.edges[{index}]", f"edge #{index} ({edge.source} -> {edge.target})"
        for end, node_id in (("source", edge.source), ("target", edge.target)):
            if node_id not in ids:
                problems.append(Problem(f"{at}.{end}", f"{name} has unknown {end} {node_id!r}"))
        if defn.mode == "DAG" and edge.source == edge.target:
            problems.append(Problem(at, f"{name} is a self-loop, which DAG mode does not allow"))
        try:
            edge_condition(edge)
        except ValueError as error:
            problems.append(Problem(f"{at}.condition", f"{name} has an invalid condition: {error}"))
    return problems


def _dag_problems(defn: WorkflowDefinition) -> list[Problem]:
    problems = [Problem("$.edges", message) for message in cycle_messages(defn)]
    starts = roots(defn)
    if not starts:
        return [*problems, Problem("$.edges", "DAG has no start: every node has an incoming edge")]
    reached = reachable(defn, starts)
    ids = [node.id for node in defn.nodes]
    return problems + [
        Problem(node_path(ids.index(node_id)), f"node {node_id!r} is unreachable from the start node(s) {', '.join(starts)}")
        for node_id in dict.fromkeys(ids) if node_id not in reached
    ]


def _graph_problems(defn: WorkflowDefinition) -> list[Problem]:
    problems: list[Problem] = []
    if defn.start_node_id is not None and defn.start_node_id not in {node.id for node in defn.nodes}:
        problems.append(Problem("$.startNodeId", f"startNodeId {defn.start_node_id!r} is not a node of the workflow"))
    if defn.mode == "DAG" and defn.nodes:
        problems += _dag_problems(defn)
    if defn.mode == "AGENTIC" and defn.start_node_id is None:
        count = sum(isinstance(node, UserInputNode) for node in defn.nodes)
        if count != 1:
            problems.append(Problem(
                "$.startNodeId", f"AGENTIC mode needs startNodeId or exactly one userInput node (found {count})",
            ))
    return problems


def meaning_problems(defn: WorkflowDefinition) -> list[Problem]:
    """What a decoded definition's types cannot say: names, ids, declared names, the graph, the planner."""
    problems: list[Problem] = []
    if not defn.display_name.strip():
        problems.append(Problem("$.displayName", "displayName must not be empty"))
    if not defn.nodes:
        problems.append(Problem("$.nodes", "workflow has no nodes"))
    problems += _id_problems(defn)
    for index, node in enumerate(defn.nodes):
        problems += _node_problems(index, node)
    problems += _edge_problems(defn) + _graph_problems(defn)
    if defn.planner.model_id is not None and not defn.planner.model_id.strip():
        problems.append(Problem(
            "$.planner.model_id", "planner.model_id must name a model (leave it out for the default model)",
        ))
    if not any(isinstance(node, OutputNode) for node in defn.nodes):
        problems.append(Problem("$.nodes", "workflow has no output node"))
    return problems


def model_problems(defn: WorkflowDefinition, model_ids: Collection[str]) -> list[Problem]:
    """Model ids named by nodes or the planner that no configured model answers to."""
    known = ", ".join(model_ids)
    named = [
        (node_path(index, f"data.{key}"), model_id)
        for index, node in enumerate(defn.nodes) if isinstance(node.data, ModelData)
        for key, model_id in (("model_id", node.data.model_id), ("reformat_model_id", node.data.reformat_model_id))
        if model_id
    ]
    if defn.planner.model_id:
        named.append(("$.planner.model_id", defn.planner.model_id))
    return [
        Problem(path, f"model {model_id!r} is not configured (configured: {known})")
        for path, model_id in named if model_id not in model_ids
    ]


STAND_IN_NAME = "unnamed"
STAND_IN_TYPE = "llm"


def _stand_in(raw: Any) -> WorkflowDefinition | None:
    """The definition whose graph can still be checked when values of it do not decode (None when it cannot be read).

    A name that is no name, a node of an unknown type and a node setting that does not decode
    are each a problem of their own already; here they stand aside (a placeholder name, a node
    of some type, the setting's default) so that the rest of the definition is still checked.
    """
    if not isinstance(raw, dict):
        return None
    form = recorded_form(raw, stand_in=STAND_IN_TYPE)
    if isinstance(form.get("name"), str):
        form["name"] = STAND_IN_NAME
    try:
        return msgspec.convert(form, WorkflowDefinition)
    except msgspec.ValidationError:
        return None


def definition_problems(raw: Any, *, model_ids: Collection[str] | None = None) -> list[Problem]:
    """Every problem of a definition (a parsed JSON value); model ids are checked when `model_ids` is given.

    References and model ids are checked once every value decodes (a value that does not may be what they name).
    """
    problems = structure_problems(raw, WorkflowDefinition)
    try:
        defn = msgspec.convert(raw, WorkflowDefinition)
    except msgspec.ValidationError:
        stand_in = _stand_in(raw)
        return problems + meaning_problems(stand_in) if stand_in is not None else problems
    problems += meaning_problems(defn) + reference_problems(defn, raw)
    if model_ids is not None:
        problems += model_problems(defn, model_ids)
    return problems


def canonical_form(defn: WorkflowDefinition) -> dict[str, Any]:
    """The definition with every default filled in and no `$schema`: equal forms are the same definition."""
    form = msgspec.to_builtins(defn)
    form.pop("$schema", None)
    return dict(form)


def definition_form(raw: Any) -> str:
    """The digest of the definition's canonical form ("" when it is not a sound authoring document)."""
    if structure_problems(raw, WorkflowDefinition):
        return ""
    return canonical_digest(canonical_form(msgspec.convert(raw, WorkflowDefinition)))


def duplicate_names(named: list[tuple[str, str]]) -> dict[str, str]:
    """For each source whose workflow name another source also uses: the problem, naming the others."""
    problems: dict[str, str] = {}
    for source, name in named:
        others = [other for other, same in named if same == name and other != source]
        if others:
            problems[source] = f"$.name: workflow name {name!r} is also used by {', '.join(others)}"
    return problems
