"""The nodes of a workflow: one tagged union on `type`, each with its typed `data`.

Every key a node type reads is a field here; executors read attributes, never dict keys.
Unknown keys are not refused by decoding (a recorded version keeps decoding); the problems
pass reports each one at its JSON path when a definition is published or validated.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

import msgspec

from domain.workflow.declarations import Declaration, Result

MAX_RETRIES = 10
Retries = Annotated[int, msgspec.Meta(ge=0, le=MAX_RETRIES)]
REMOTE_BACKEND = "hermes_remote"


class FileTemplate(msgspec.Struct, frozen=True):
    """A file written into the run's workspace; both strings are templates."""

    path: str
    content: str = ""


class ActionChoice(msgspec.Struct, frozen=True):
    """One action a smartAction node may choose."""

    id: str
    description: str = ""


class Position(msgspec.Struct, frozen=True):
    """Where a canvas editor draws the node (ignored by the engine)."""

    x: float
    y: float


class NodeData(msgspec.Struct, frozen=True):
    """Settings every node type accepts."""

    description: str = ""
    """What the node does (an AGENTIC planner reads it)."""
    timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] | None = msgspec.field(default=None, name="timeoutSeconds")
    """The visit's time limit (default: FLOWTRAIL_NODE_TIMEOUT_SECONDS)."""
    recoverable: bool = True
    """False: a visit interrupted by a restart fails instead of running again."""

    @property
    def about(self) -> str:
        """What the node does, as a planner is told."""
        return self.description


class UserInputData(NodeData, frozen=True):
    """A userInput node: the run variables it declares."""

    inputs: list[Declaration] = []


class ModelData(NodeData, frozen=True):
    """An llm or agent node: a prompt to a model, optionally tools and declared outputs."""

    prompt: str = ""
    system_prompt: str | None = msgspec.field(default=None, name="systemPrompt")
    model_id: str | None = None
    """A configured model id (FLOWTRAIL_MODELS) or `scripted`; none: the default model."""
    reformat_model_id: str | None = None
    """The model that re-formats an answer that does not match `outputs`; none: the default model."""
    outputs: list[Declaration] = []
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
    repeat_safe: bool = msgspec.field(default=False, name="repeatSafe")
    """hermes_remote nodes: true when submitting the node's prompt to its gateway twice is harmless; only then is a
    prompt whose gateway run's outcome cannot be read submitted again (default: the visit fails, outcome unknown)."""

    @property
    def about(self) -> str:
        """What the node does: its description, else its prompt."""
        return self.description or self.prompt

    @property
    def remote(self) -> bool:
        """True when the visit runs on a Hermes gateway."""
        return self.backend == REMOTE_BACKEND

    def visit_script(self, iter_seq: int) -> Any:
        """The script of one visit: `scripts[iterSeq-1]` (the last repeats) when given, else `script`."""
        if self.scripts:
            return self.scripts[min(iter_seq, len(self.scripts)) - 1]
        return self.script


class SmartActionData(ModelData, frozen=True):
    """A smartAction node: the model chooses one of `actions`."""

    actions: list[str | ActionChoice] = []

    @property
    def choices(self) -> list[ActionChoice]:
        """The actions, each with its id and description (a bare id has none)."""
        return [ActionChoice(item) if isinstance(item, str) else item for item in self.actions]


class OutputData(NodeData, frozen=True):
    """An output node: the run's results and the files it writes."""

    outputs: list[Result] = []
    files: list[FileTemplate] = []


class Node(msgspec.Struct, frozen=True, tag_field="type"):
    """A node of the workflow; `type` selects what `data` holds."""

    id: str
    label: str = ""
    position: Position | None = None


class UserInputNode(Node, frozen=True, tag="userInput"):
    """Passes the run's declared variables on."""

    type: ClassVar[Literal["userInput"]] = "userInput"
    data: UserInputData = msgspec.field(default_factory=UserInputData)


class LlmNode(Node, frozen=True, tag="llm"):
    """One model answer."""

    type: ClassVar[Literal["llm"]] = "llm"
    data: ModelData = msgspec.field(default_factory=ModelData)


class AgentNode(Node, frozen=True, tag="agent"):
    """A multi-turn model loop with tools."""

    type: ClassVar[Literal["agent"]] = "agent"
    data: ModelData = msgspec.field(default_factory=ModelData)


class SmartActionNode(Node, frozen=True, tag="smartAction"):
    """A model answer that chooses an action (edge conditions branch on it)."""

    type: ClassVar[Literal["smartAction"]] = "smartAction"
    data: SmartActionData = msgspec.field(default_factory=SmartActionData)


class OutputNode(Node, frozen=True, tag="output"):
    """Builds the run's result."""

    type: ClassVar[Literal["output"]] = "output"
    data: OutputData = msgspec.field(default_factory=OutputData)


AnyNode = UserInputNode | LlmNode | AgentNode | SmartActionNode | OutputNode
ModelNode = LlmNode | AgentNode | SmartActionNode
NODE_CLASSES: dict[str, type[AnyNode]] = {
    kind.type: kind for kind in (UserInputNode, LlmNode, AgentNode, SmartActionNode, OutputNode)
}
"""Each node class by its `type` tag."""
MODEL_NODE_TYPES = frozenset({"llm", "agent", "smartAction"})
