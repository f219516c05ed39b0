"""The workflow model, typed once: nodes with typed data, declarations, the definition and its graph, one problems pass, the JSON Schema."""

from domain.workflow.declarations import JSON_TYPES, Declaration, OutputType, Result, of_type
from domain.workflow.definition import (
    MAX_NAME_LENGTH,
    NAME_RE,
    Edge,
    Planner,
    RunLimits,
    WorkflowDefinition,
    decode_workflow,
    edge_condition,
    edges_into,
    node_by_id,
    predecessors,
    roots,
    start_nodes,
    successors,
    workflow_from_dict,
    workflow_inputs,
    workflow_outputs,
)
from domain.workflow.graph import ancestors, descendants, topological_order
from domain.workflow.nodes import (
    MODEL_NODE_TYPES,
    NODE_CLASSES,
    REMOTE_BACKEND,
    ActionChoice,
    AgentNode,
    AnyNode,
    FileTemplate,
    LlmNode,
    ModelData,
    ModelNode,
    Node,
    NodeData,
    OutputData,
    OutputNode,
    Position,
    SmartActionData,
    SmartActionNode,
    UserInputData,
    UserInputNode,
)
from domain.workflow.problems import canonical_form, definition_form, definition_problems, duplicate_names
from domain.workflow.recorded import recorded_definition
from domain.workflow.references import node_path
from domain.workflow.schema import workflow_json_schema, workflow_schema_text
from domain.workflow.structure import Problem
from domain.workflow.variables import InvalidVariables, check_variables

__all__ = [
    "JSON_TYPES", "MAX_NAME_LENGTH", "MODEL_NODE_TYPES", "NAME_RE", "NODE_CLASSES", "REMOTE_BACKEND", "ActionChoice", "AgentNode",
    "AnyNode", "Declaration", "Edge", "FileTemplate", "InvalidVariables", "LlmNode", "ModelData", "ModelNode", "Node",
    "NodeData", "OutputData", "OutputNode", "OutputType", "Planner", "Position", "Problem", "Result", "RunLimits",
    "SmartActionData", "SmartActionNode", "UserInputData", "UserInputNode", "WorkflowDefinition", "ancestors",
    "canonical_form", "check_variables", "decode_workflow", "descendants", "definition_form", "definition_problems",
    "duplicate_names", "edge_condition", "edges_into", "node_by_id", "node_path", "of_type", "predecessors",
    "recorded_definition", "roots", "start_nodes", "successors", "topological_order", "workflow_from_dict",
    "workflow_inputs", "workflow_json_schema", "workflow_outputs", "workflow_schema_text",
]
