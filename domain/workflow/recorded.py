"""A published version's definition as it was recorded, decoded even where today's types are stricter.

The stored definition is never rewritten: when a value recorded before it was checked no longer
decodes, the fold leaves that value out, so its default applies, rather than stopping the
catalogue from loading (decisions 12 and 32). Any other flaw still raises GraphInvalid.
"""

from __future__ import annotations

from typing import Any

import msgspec

from domain.errors import GraphInvalid
from domain.workflow.definition import Planner, WorkflowDefinition, workflow_from_dict
from domain.workflow.nodes import NODE_CLASSES

JSON = dict[str, Any]


def _decodes(value: Any, kind: Any) -> bool:
    try:
        msgspec.convert(value, kind)
    except msgspec.ValidationError:
        return False
    return True


def _data_type(node_class: type) -> Any:
    return next(field.type for field in msgspec.structs.fields(node_class) if field.name == "data")


def _recorded_node(node: Any, stand_in: str | None) -> Any:
    """The node with each key of its data that does not decode left out (the node itself when it decodes).

    `stand_in`: the type a node of an unknown (or no) type is read as; None leaves such a node as it is.
    """
    if not isinstance(node, dict):
        return node
    node_class = NODE_CLASSES.get(str(node.get("type")))
    if node_class is None and stand_in is not None:
        node, node_class = {**node, "type": stand_in}, NODE_CLASSES[stand_in]
    if node_class is None or _decodes(node, node_class):
        return node
    data, kind = node.get("data"), _data_type(node_class)
    kept = {key: value for key, value in data.items() if _decodes({key: value}, kind)} if isinstance(data, dict) else {}
    return {**node, "data": kept}


def recorded_form(definition: JSON, *, stand_in: str | None = None) -> JSON:
    """The definition with planner settings and node settings that do not decode left out."""
    form = dict(definition)
    if "planner" in form and not _decodes(form["planner"], Planner):
        del form["planner"]
    if isinstance(form.get("nodes"), list):
        form["nodes"] = [_recorded_node(node, stand_in) for node in form["nodes"]]
    return form


def recorded_definition(definition: JSON) -> WorkflowDefinition:
    """A published version's definition: planner settings or node settings that no longer decode take their defaults."""
    try:
        return workflow_from_dict(definition)
    except GraphInvalid:
        form = recorded_form(definition)
        if form == definition:
            raise
        return workflow_from_dict(form)
