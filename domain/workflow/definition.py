"""A workflow definition (the wire shape, camelCase JSON), its decoding, and the helpers that read its graph.

Decoding checks structure (msgspec's precise messages, `GraphInvalid`); `domain.workflow.problems`
checks meaning and reports every problem at once. Unknown keys are ignored here, so every
recorded version keeps decoding; the problems pass reports them when a definition is published.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Any, TypeVar

import msgspec

from domain.conditions import Condition, parse_condition
from domain.errors import GraphInvalid
from domain.vocabulary import RunMode
from domain.workflow.declarations import Declaration, Result
from domain.workflow.nodes import AnyNode, OutputNode, UserInputNode

NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
MAX_NAME_LENGTH = 64
D = TypeVar("D", Declaration, Result)
Name = Annotated[str, msgspec.Meta(pattern=NAME_RE.pattern, max_length=MAX_NAME_LENGTH)]


class Edge(msgspec.Struct, frozen=True):
    """A directed edge; `condition` (e.g. `{{gate.action}} == "short"`) guards it."""

    source: str
    target: str
    condition: str | None = None


class RunLimits(msgspec.Struct, frozen=True, rename="camel"):
    """Visit caps of an AGENTIC run."""

    max_visits_per_node: Annotated[int, msgspec.Meta(ge=1, le=50)] = 50
    """The product cap is 50 visits a node."""
    max_visits_per_run: Annotated[int, msgspec.Meta(ge=1, le=200)] = 200
    """The product cap is 200 visits a run."""


class Planner(msgspec.Struct, frozen=True):
    """How an AGENTIC run's planner is asked."""

    model_id: str | None = None
    """The planner's model; None: the service's default model."""
    prompt: str = ""
    """Extra guidance, appended to the planner's instructions."""
    script: list[Any] | None = None
    """The scripted model's turns, one a decision (checked by that model when it plays them)."""


class WorkflowDefinition(msgspec.Struct, frozen=True, rename="camel"):
    """A workflow definition as an author writes it."""

    name: Name
    display_name: str
    mode: RunMode
    nodes: list[AnyNode]
    description: str = ""
    edges: list[Edge] = []
    start_node_id: str | None = None
    limits: RunLimits = msgspec.field(default_factory=RunLimits)
    planner: Planner = msgspec.field(default_factory=Planner)
    schema: str | None = msgspec.field(default=None, name="$schema")
    """The schema's URL, for editors (not part of the definition)."""


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


def edge_condition(edge: Edge) -> Condition | None:
    """The parsed branch condition of an edge; None when it has none (or a blank one)."""
    if edge.condition is None or not edge.condition.strip():
        return None
    return parse_condition(edge.condition)


def valid_edges(defn: WorkflowDefinition) -> list[Edge]:
    """The edges whose both ends are nodes of the definition."""
    ids = {node.id for node in defn.nodes}
    return [edge for edge in defn.edges if edge.source in ids and edge.target in ids]


def predecessors(defn: WorkflowDefinition, node_id: str) -> list[str]:
    """Distinct sources of the edges into a node, in edge order."""
    return list(dict.fromkeys(edge.source for edge in defn.edges if edge.target == node_id))


def successors(defn: WorkflowDefinition, node_id: str) -> list[str]:
    """Distinct targets of the edges out of a node, in edge order."""
    return list(dict.fromkeys(edge.target for edge in defn.edges if edge.source == node_id))


def edges_into(defn: WorkflowDefinition, node_id: str) -> list[Edge]:
    """The edges that end at a node (with their conditions)."""
    return [edge for edge in defn.edges if edge.target == node_id]


def node_by_id(defn: WorkflowDefinition, node_id: str) -> AnyNode | None:
    """The node with this id, if any."""
    return next((node for node in defn.nodes if node.id == node_id), None)


def roots(defn: WorkflowDefinition) -> list[str]:
    """Nodes with no incoming edge other than a self-loop, in node order."""
    targets = {edge.target for edge in valid_edges(defn) if edge.source != edge.target}
    return list(dict.fromkeys(node.id for node in defn.nodes if node.id not in targets))


def start_nodes(defn: WorkflowDefinition) -> list[str]:
    """Where a run begins: the roots in DAG mode; startNodeId or the single userInput node in AGENTIC."""
    if defn.mode == "DAG":
        return roots(defn)
    if defn.start_node_id is not None:
        return [defn.start_node_id] if node_by_id(defn, defn.start_node_id) else []
    inputs = [node.id for node in defn.nodes if isinstance(node, UserInputNode)]
    return inputs if len(inputs) == 1 else []


def _first_by_name(items: Iterable[D]) -> list[D]:
    found: dict[str, D] = {}
    for item in items:
        found.setdefault(item.name, item)
    return list(found.values())


def workflow_inputs(defn: WorkflowDefinition) -> list[Declaration]:
    """The run variables declared by userInput nodes (first declaration of a name wins)."""
    return _first_by_name(item for node in defn.nodes if isinstance(node, UserInputNode) for item in node.data.inputs)


def workflow_outputs(defn: WorkflowDefinition) -> list[Result]:
    """The results declared by output nodes (first declaration of a name wins)."""
    return _first_by_name(item for node in defn.nodes if isinstance(node, OutputNode) for item in node.data.outputs)
