"""Workflow definitions: the wire shape (camelCase JSON), full validation and graph helpers.

Decoding checks structure (msgspec's precise messages); `validate_workflow` checks meaning
and reports every problem at once. This lenient form ignores unknown keys, so every recorded
version keeps decoding; publishing checks the strict authoring form first (`domain.validation`).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import msgspec

from domain.conditions import Condition, parse_condition
from domain.errors import GraphInvalid
from domain.outputs import parse_output_declarations, retry_policy_for
from domain.templates import SEGMENT, check_templates
from domain.vocabulary import NODE_TYPES, NodeType, RunMode

MODEL_NODE_TYPES: tuple[NodeType, ...] = ("llm", "agent", "smartAction")
NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
NODE_ID_RE = re.compile(rf"^{SEGMENT}$")
MAX_NAME_LENGTH = 64


class Limits(msgspec.Struct, frozen=True, rename="camel"):
    """Visit caps for AGENTIC runs (the product caps are 50 a node, 200 a run)."""

    max_visits_per_node: Annotated[int, msgspec.Meta(ge=1, le=50)] = 50
    max_visits_per_run: Annotated[int, msgspec.Meta(ge=1, le=200)] = 200


class PlannerSettings(msgspec.Struct, frozen=True):
    """How an AGENTIC run's planner is asked (snake_case keys, like node data)."""

    model_id: str | None = None
    """The planner's model; None: the service's default model."""
    prompt: str = ""
    """Extra guidance, appended to the planner's instructions."""
    script: list[Any] | None = None
    """The scripted model's turns, one a decision (checked by that model when it plays them)."""


class NodeDefinition(msgspec.Struct, frozen=True):
    """One node of a workflow; `data` holds its type-specific settings."""

    id: str
    type: str
    label: str = ""
    data: dict[str, Any] = {}


class EdgeDefinition(msgspec.Struct, frozen=True):
    """A directed edge, optionally guarded by a branch condition."""

    source: str
    target: str
    condition: str | None = None


class WorkflowDefinition(msgspec.Struct, frozen=True, rename="camel"):
    """A workflow as published: nodes, edges and how to run them."""

    name: str
    display_name: str
    mode: RunMode
    nodes: list[NodeDefinition]
    description: str = ""
    edges: list[EdgeDefinition] = []
    start_node_id: str | None = None
    limits: Limits = msgspec.field(default_factory=Limits)
    planner: PlannerSettings = msgspec.field(default_factory=PlannerSettings)


class WorkflowInput(msgspec.Struct, frozen=True):
    """A run variable the workflow asks for (from a userInput node's `inputs`)."""

    name: str
    type: str = "string"
    required: bool = False
    description: str = ""


class WorkflowOutput(msgspec.Struct, frozen=True):
    """A result the workflow produces (from an output node's `outputs`; its `value` template stays internal)."""

    name: str
    type: str = "string"
    description: str = ""


DECLARATIONS: dict[str, tuple[str, Any]] = {
    "userInput": ("inputs", list[WorkflowInput]), "output": ("outputs", list[WorkflowOutput]),
}
"""Per node type: the data key that declares run inputs or results, and the type of its list."""


def _invalid(error: msgspec.MsgspecError) -> GraphInvalid:
    return GraphInvalid([f"workflow definition is malformed: {error}"])


def decode_workflow(raw: bytes | str) -> WorkflowDefinition:
    """Decode a JSON document; GraphInvalid carries msgspec's precise message."""
    try:
        return msgspec.json.decode(raw, type=WorkflowDefinition)
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise _invalid(error) from None


def workflow_from_dict(obj: Any) -> WorkflowDefinition:
    """Convert an already-parsed JSON object; GraphInvalid carries msgspec's precise message."""
    try:
        return msgspec.convert(obj, WorkflowDefinition)
    except msgspec.ValidationError as error:
        raise _invalid(error) from None


def edge_condition(edge: EdgeDefinition) -> Condition | None:
    """The parsed branch condition of an edge; None when it has none (or a blank one)."""
    if edge.condition is None or not edge.condition.strip():
        return None
    return parse_condition(edge.condition)


def _edge_name(index: int, edge: EdgeDefinition) -> str:
    return f"edge #{index} ({edge.source} -> {edge.target})"


def _valid_edges(defn: WorkflowDefinition) -> list[EdgeDefinition]:
    ids = {node.id for node in defn.nodes}
    return [edge for edge in defn.edges if edge.source in ids and edge.target in ids]


def predecessors(defn: WorkflowDefinition, node_id: str) -> list[str]:
    """Distinct sources of the edges into a node, in edge order."""
    return list(dict.fromkeys(edge.source for edge in defn.edges if edge.target == node_id))


def successors(defn: WorkflowDefinition, node_id: str) -> list[str]:
    """Distinct targets of the edges out of a node, in edge order."""
    return list(dict.fromkeys(edge.target for edge in defn.edges if edge.source == node_id))


def edges_into(defn: WorkflowDefinition, node_id: str) -> list[EdgeDefinition]:
    """The edges that end at a node (with their conditions)."""
    return [edge for edge in defn.edges if edge.target == node_id]


def node_by_id(defn: WorkflowDefinition, node_id: str) -> NodeDefinition | None:
    """The node with this id, if any."""
    return next((node for node in defn.nodes if node.id == node_id), None)


def roots(defn: WorkflowDefinition) -> list[str]:
    """Nodes with no incoming edge other than a self-loop, in node order."""
    targets = {edge.target for edge in _valid_edges(defn) if edge.source != edge.target}
    return list(dict.fromkeys(node.id for node in defn.nodes if node.id not in targets))


def start_nodes(defn: WorkflowDefinition) -> list[str]:
    """Where a run begins: the roots in DAG mode; startNodeId or the single userInput node in AGENTIC."""
    if defn.mode == "DAG":
        return roots(defn)
    if defn.start_node_id is not None:
        return [defn.start_node_id] if node_by_id(defn, defn.start_node_id) else []
    inputs = [node.id for node in defn.nodes if node.type == "userInput"]
    return inputs if len(inputs) == 1 else []


def topological_order(defn: WorkflowDefinition) -> list[str]:
    """Node ids so that every edge points forward (ties in node order); GraphInvalid on a cycle."""
    order, edges = list(dict.fromkeys(node.id for node in defn.nodes)), _valid_edges(defn)
    result: list[str] = []
    while len(result) < len(order):
        done = set(result)
        ready = [n for n in order if n not in done and all(e.source in done for e in edges if e.target == n)]
        if not ready:
            break
        result.append(ready[0])
    if len(result) < len(order):
        raise GraphInvalid(_cycle_problems(defn) or ["workflow graph has a self-loop"], workflow=defn.name)
    return result


def _cycles(defn: WorkflowDefinition) -> list[list[str]]:
    """One cycle (as a closed path) per back edge found by depth-first search, self-loops excluded."""
    adjacency: dict[str, list[str]] = {node.id: [] for node in defn.nodes}
    for edge in _valid_edges(defn):
        if edge.source != edge.target and edge.target not in adjacency[edge.source]:
            adjacency[edge.source].append(edge.target)
    state: dict[str, int] = {}
    found: list[list[str]] = []
    seen: set[frozenset[str]] = set()
    for start in adjacency:
        if start in state:
            continue
        stack: list[tuple[str, int]] = [(start, 0)]
        path = [start]
        state[start] = 1
        while stack:
            node, index = stack[-1]
            if index < len(adjacency[node]):
                stack[-1] = (node, index + 1)
                nxt = adjacency[node][index]
                if state.get(nxt) == 1:
                    cycle = path[path.index(nxt):] + [nxt]
                    if frozenset(cycle) not in seen:
                        seen.add(frozenset(cycle))
                        found.append(cycle)
                elif nxt not in state:
                    state[nxt] = 1
                    stack.append((nxt, 0))
                    path.append(nxt)
            else:
                state[node] = 2
                stack.pop()
                path.pop()
    return found


def _cycle_problems(defn: WorkflowDefinition) -> list[str]:
    return [f"cycle in DAG mode: {' -> '.join(cycle)}" for cycle in _cycles(defn)]


def _reachable(defn: WorkflowDefinition, starts: list[str]) -> set[str]:
    seen, queue = set(starts), list(starts)
    while queue:
        for nxt in successors(defn, queue.pop()):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return seen


class Problem(msgspec.Struct, frozen=True):
    """One thing wrong with a definition, at the JSON path where it is (`$.nodes[2].data.promt`)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def node_path(index: int, *keys: str) -> str:
    """The JSON path of a node (or of a key inside it)."""
    return "".join([f"$.nodes[{index}]", *(f".{key}" for key in keys)])


def _node_problems(index: int, node: NodeDefinition) -> list[Problem]:
    at = node_path(index)
    problems = [Problem(at, f"node {node.id!r} {problem}") for problem in check_templates(node.data, "data")]
    if node.type not in NODE_TYPES:
        expected = ", ".join(NODE_TYPES)
        problems.append(Problem(f"{at}.type", f"node {node.id!r} has unknown type {node.type!r} (expected one of {expected})"))
    if node.type in DECLARATIONS:
        key, kind = DECLARATIONS[node.type]
        try:
            msgspec.convert(node.data.get(key) or [], kind, strict=False)
        except msgspec.ValidationError as error:
            problems.append(Problem(f"{at}.data.{key}", f"node {node.id!r} has an invalid {key} declaration: {error}"))
    if node.type in MODEL_NODE_TYPES:
        for check in (lambda: parse_output_declarations(node.data), lambda: retry_policy_for(node.type, node.data)):
            try:
                check()
            except ValueError as error:
                problems.append(Problem(f"{at}.data", f"node {node.id!r}: {error}"))
    return problems


def _naming_problems(defn: WorkflowDefinition) -> list[Problem]:
    problems: list[Problem] = []
    if not NAME_RE.match(defn.name):
        problems.append(Problem(
            "$.name", f"name {defn.name!r} must be kebab-case (lowercase letters and digits joined by single '-')",
        ))
    if len(defn.name) > MAX_NAME_LENGTH:
        problems.append(Problem(
            "$.name", f"name is {len(defn.name)} characters long; at most {MAX_NAME_LENGTH} are allowed",
        ))
    if not defn.display_name.strip():
        problems.append(Problem("$.displayName", "displayName must not be empty"))
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
        at = f"$.edges[{index}]"
        for end in ("source", "target"):
            if getattr(edge, end) not in ids:
                problems.append(Problem(
                    f"{at}.{end}", f"{_edge_name(index, edge)} has unknown {end} {getattr(edge, end)!r}",
                ))
        if defn.mode == "DAG" and edge.source == edge.target:
            problems.append(Problem(at, f"{_edge_name(index, edge)} is a self-loop, which DAG mode does not allow"))
        try:
            edge_condition(edge)
        except ValueError as error:
            problems.append(Problem(f"{at}.condition", f"{_edge_name(index, edge)} has an invalid condition: {error}"))
    return problems


def _graph_problems(defn: WorkflowDefinition) -> list[Problem]:
    problems: list[Problem] = []
    ids = [node.id for node in defn.nodes]
    if defn.start_node_id is not None and defn.start_node_id not in ids:
        problems.append(Problem("$.startNodeId", f"startNodeId {defn.start_node_id!r} is not a node of the workflow"))
    if defn.mode == "DAG" and defn.nodes:
        problems += [Problem("$.edges", message) for message in _cycle_problems(defn)]
        starts = roots(defn)
        if not starts:
            problems.append(Problem("$.edges", "DAG has no start: every node has an incoming edge"))
        else:
            reached = _reachable(defn, starts)
            for node_id in dict.fromkeys(ids):
                if node_id not in reached:
                    problems.append(Problem(
                        node_path(ids.index(node_id)),
                        f"node {node_id!r} is unreachable from the start node(s) {', '.join(starts)}",
                    ))
    if defn.mode == "AGENTIC" and defn.start_node_id is None:
        count = sum(node.type == "userInput" for node in defn.nodes)
        if count != 1:
            problems.append(Problem(
                "$.startNodeId", f"AGENTIC mode needs startNodeId or exactly one userInput node (found {count})",
            ))
    return problems


def workflow_findings(defn: WorkflowDefinition) -> list[Problem]:
    """Every problem with a decoded definition, each at its JSON path (an empty list when it is sound)."""
    problems = _naming_problems(defn)
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
    if not any(node.type == "output" for node in defn.nodes):
        problems.append(Problem("$.nodes", "workflow has no output node"))
    return problems


def validate_workflow(defn: WorkflowDefinition) -> list[str]:
    """Every problem with a definition (an empty list when it is sound)."""
    return [problem.message for problem in workflow_findings(defn)]


def check_workflow(defn: WorkflowDefinition) -> WorkflowDefinition:
    """The definition itself when sound; GraphInvalid listing every problem otherwise."""
    problems = validate_workflow(defn)
    if problems:
        raise GraphInvalid(problems, workflow=defn.name)
    return defn


def workflow_inputs(defn: WorkflowDefinition) -> list[WorkflowInput]:
    """The run variables declared by userInput nodes (first declaration of a name wins)."""
    return _declared(defn, "userInput")


def workflow_outputs(defn: WorkflowDefinition) -> list[WorkflowOutput]:
    """The results declared by output nodes (first declaration of a name wins)."""
    return _declared(defn, "output")


def _declared(defn: WorkflowDefinition, node_type: str) -> list[Any]:
    key, kind = DECLARATIONS[node_type]
    found: dict[str, Any] = {}
    for node in (node for node in defn.nodes if node.type == node_type):
        try:
            items = msgspec.convert(node.data.get(key) or [], kind, strict=False)
        except msgspec.ValidationError:
            continue  # reported by validate_workflow; a listing never fails on it
        for item in items:
            found.setdefault(item.name, item)
    return list(found.values())
