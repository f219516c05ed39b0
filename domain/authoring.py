"""The authoring form of a workflow definition: every key a node type reads, nothing else.

These Structs refuse unknown keys, so a typo (`promt`) is a problem when a definition is
published or validated, and `msgspec.json.schema` turns them into the JSON Schema served at
`/api/v1/schemas/workflow.json` and kept in `docs/workflow.schema.json`. Recorded versions
are still read with the lenient `domain.workflow.WorkflowDefinition` (a version stored before
these rules keeps running).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from domain.outputs import MAX_RETRIES, OutputType
from domain.vocabulary import RunMode
from domain.workflow.lenient import MAX_NAME_LENGTH, NAME_RE, EdgeDefinition, Limits, PlannerSettings

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
Retries = Annotated[int, msgspec.Meta(ge=0, le=MAX_RETRIES)]
Name = Annotated[str, msgspec.Meta(pattern=NAME_RE.pattern, max_length=MAX_NAME_LENGTH)]


class Strict(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Base of the authoring Structs: an unknown key is a problem."""


class InputDeclaration(Strict, frozen=True):
    """A run variable the workflow asks for; run creation refuses a missing required one or a wrong type."""

    name: str
    type: OutputType = "string"
    required: bool = False
    description: str = ""


class OutputDeclaration(Strict, frozen=True):
    """A field a model node must answer with (its answer is then strict JSON)."""

    name: str
    type: OutputType = "string"
    required: bool = False
    description: str = ""


class ResultDeclaration(Strict, frozen=True):
    """A result of the run; `value` is a template (default `{{name}}`)."""

    name: str
    type: OutputType = "string"
    description: str = ""
    value: Any = None


class FileTemplate(Strict, frozen=True):
    """A file written into the run's workspace; both strings are templates."""

    path: str
    content: str = ""


class ActionChoice(Strict, frozen=True):
    """One action a smartAction node may choose."""

    id: str
    description: str = ""


class Position(msgspec.Struct, frozen=True):
    """Where a canvas editor draws the node (ignored by the engine)."""

    x: float
    y: float


class NodeData(Strict, frozen=True):
    """Settings every node type accepts."""

    description: str = ""
    """What the node does (an AGENTIC planner reads it)."""
    timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] | None = msgspec.field(default=None, name="timeoutSeconds")
    """The visit's time limit (default: FLOWTRAIL_NODE_TIMEOUT_SECONDS)."""
    recoverable: bool = True
    """False: a visit interrupted by a restart fails instead of running again."""


class UserInputData(NodeData, frozen=True):
    """A userInput node: the run variables it declares."""

    inputs: list[InputDeclaration] = []


class ModelData(NodeData, frozen=True):
    """An llm or agent node: a prompt to a model, optionally tools and declared outputs."""

    prompt: str = ""
    system_prompt: str | None = msgspec.field(default=None, name="systemPrompt")
    model_id: str | None = None
    """A configured model id (FLOWTRAIL_MODELS) or `scripted`; none: the default model."""
    reformat_model_id: str | None = None
    """The model that re-formats an answer that does not match `outputs`; none: the default model."""
    outputs: list[OutputDeclaration] = []
    runtime_max_retries: Retries | None = msgspec.field(default=None, name="runtimeMaxRetries")
    format_max_retries: Retries | None = msgspec.field(default=None, name="formatMaxRetries")
    tools: list[str] = []
    max_iterations: Annotated[int, msgspec.Meta(ge=1)] | None = msgspec.field(default=None, name="maxIterations")
    ask_user: bool = msgspec.field(default=False, name="askUser")
    script: Any = None
    """The scripted model's turns (model_id `scripted`)."""
    scripts: list[Any] | None = None
    """One script per visit (the last repeats)."""
    backend: Literal["hermes_remote"] | None = None
    """agent and smartAction nodes: `hermes_remote` runs the visit on a Hermes gateway (docs/hermes.md)."""
    gateway: str | None = None
    """The gateway id of FLOWTRAIL_HERMES_GATEWAYS (none: the only one configured)."""


class SmartActionData(ModelData, frozen=True):
    """A smartAction node: the model chooses one of `actions`."""

    actions: list[str | ActionChoice] = []


class OutputData(NodeData, frozen=True):
    """An output node: the run's results and the files it writes."""

    outputs: list[ResultDeclaration] = []
    files: list[FileTemplate] = []


class Node(Strict, frozen=True, tag_field="type"):
    """A node of the workflow; `type` selects what `data` holds."""

    id: str
    label: str = ""
    position: Position | None = None


class UserInputNode(Node, frozen=True, tag="userInput"):
    """Passes the run's declared variables on."""

    data: UserInputData = msgspec.field(default_factory=UserInputData)


class LlmNode(Node, frozen=True, tag="llm"):
    """One model answer."""

    data: ModelData = msgspec.field(default_factory=ModelData)


class AgentNode(Node, frozen=True, tag="agent"):
    """A multi-turn model loop with tools."""

    data: ModelData = msgspec.field(default_factory=ModelData)


class SmartActionNode(Node, frozen=True, tag="smartAction"):
    """A model answer that chooses an action (edge conditions branch on it)."""

    data: SmartActionData = msgspec.field(default_factory=SmartActionData)


class OutputNode(Node, frozen=True, tag="output"):
    """Builds the run's result."""

    data: OutputData = msgspec.field(default_factory=OutputData)


AnyNode = UserInputNode | LlmNode | AgentNode | SmartActionNode | OutputNode


class Edge(EdgeDefinition, frozen=True, forbid_unknown_fields=True):
    """A directed edge; `condition` (e.g. `{{gate.action}} == "short"`) guards it."""


class RunLimits(Limits, frozen=True, forbid_unknown_fields=True):
    """Visit caps of an AGENTIC run."""


class Planner(PlannerSettings, frozen=True, forbid_unknown_fields=True):
    """How an AGENTIC run's planner is asked."""


class WorkflowDocument(Strict, frozen=True, rename="camel"):
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


def workflow_json_schema() -> dict[str, Any]:
    """The JSON Schema of workflow definitions, generated from the Structs above."""
    schema = msgspec.json.schema(WorkflowDocument)
    return {"$schema": SCHEMA_DIALECT, "title": "flowtrail workflow definition", **schema}


def canonical_form(document: WorkflowDocument) -> dict[str, Any]:
    """The definition with every default filled in and no `$schema`: equal forms are the same definition."""
    form = msgspec.to_builtins(document)
    form.pop("$schema", None)
    return dict(form)


def workflow_schema_text() -> bytes:
    """The schema as committed in `docs/workflow.schema.json`: JSON indented by 2, one final newline."""
    return msgspec.json.format(msgspec.json.encode(workflow_json_schema()), indent=2) + b"\n"
