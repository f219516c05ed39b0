"""Everything wrong with a workflow definition at once, each problem at its JSON path.

msgspec stops at the first error, so the document is walked along the authoring Structs
(`domain.authoring`): every unknown key, every value msgspec refuses (its own message), then
the graph's own rules, template references that cannot resolve where they stand, and model
ids that are not configured. Pure: the caller says which models exist.
"""

from __future__ import annotations

import re
import types
from collections.abc import Collection, Iterator
from functools import cache
from typing import Any, Union, get_args, get_origin

import msgspec

from domain.authoring import WorkflowDocument, canonical_form
from domain.canonical import canonical_digest
from domain.templates import references, split_path
from domain.workflow.lenient import (
    MODEL_NODE_TYPES,
    Problem,
    WorkflowDefinition,
    node_path,
    predecessors,
    workflow_findings,
    workflow_inputs,
)

UPLOADED_FILES = "uploadedFiles"
"""The variable every run has: the paths of its uploaded files."""
MODEL_KEYS = ("model_id", "reformat_model_id")
KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
AT_SUFFIX = re.compile(r" - at `\$[^`]*`$")


def _key_path(path: str, key: str) -> str:
    return f"{path}.{key}" if KEY_RE.match(key) else f"{path}[{msgspec.json.encode(key).decode()}]"


def _msgspec_problem(value: Any, kind: Any, path: str) -> list[Problem]:
    try:
        msgspec.convert(value, kind)
    except msgspec.ValidationError as error:
        return [Problem(path, AT_SUFFIX.sub("", str(error)))]
    return []


@cache
def _fields(kind: type[msgspec.Struct]) -> dict[str, msgspec.structs.FieldInfo]:
    """A Struct's fields by their JSON name (resolving annotations is slow, so once a type)."""
    return {field.encode_name: field for field in msgspec.structs.fields(kind)}


def _struct_problems(value: Any, kind: type[msgspec.Struct], path: str) -> list[Problem]:
    if not isinstance(value, dict):
        return _msgspec_problem(value, kind, path)
    fields = _fields(kind)
    tag_field = kind.__struct_config__.tag_field
    problems: list[Problem] = []
    for key, item in value.items():
        field = fields.get(key)
        if field is not None:
            problems += structure_problems(item, field.type, _key_path(path, key))
        elif key != tag_field:
            problems.append(Problem(_key_path(path, key), "unknown field"))
    for name, field in fields.items():
        if field.required and name not in value:
            problems.append(Problem(path, f"Object missing required field `{name}`"))
    return problems


def _tagged(members: tuple[Any, ...]) -> dict[Any, type[msgspec.Struct]]:
    return {
        member.__struct_config__.tag: member for member in members
        if isinstance(member, type) and issubclass(member, msgspec.Struct) and member.__struct_config__.tag_field
    }


def _union_problems(value: Any, kind: Any, path: str) -> list[Problem]:
    members = get_args(kind)
    if value is None and type(None) in members:
        return []
    tagged = _tagged(members)
    if tagged and isinstance(value, dict):
        tag_field = str(next(iter(tagged.values())).__struct_config__.tag_field)
        if tag_field not in value:
            return [Problem(path, f"Object missing required field `{tag_field}`")]
        chosen = tagged.get(value[tag_field])
        if chosen is None:
            expected = ", ".join(str(tag) for tag in tagged)
            problem = f"unknown {tag_field} {value[tag_field]!r} (expected one of {expected})"
            return [Problem(_key_path(path, tag_field), problem)]
        return _struct_problems(value, chosen, path)
    structs = [m for m in members if isinstance(m, type) and issubclass(m, msgspec.Struct)]
    if structs and isinstance(value, dict):
        return _struct_problems(value, structs[0], path)
    return _msgspec_problem(value, kind, path)


def structure_problems(value: Any, kind: Any, path: str = "$") -> list[Problem]:
    """Every unknown key and every value msgspec refuses, walking `value` along the type `kind`."""
    origin = get_origin(kind)
    if kind is Any:
        return []
    if isinstance(kind, type) and issubclass(kind, msgspec.Struct):
        return _struct_problems(value, kind, path)
    if origin in (Union, types.UnionType):
        return _union_problems(value, kind, path)
    if origin is list and isinstance(value, list):
        (item_kind,) = get_args(kind)
        return [found for index, item in enumerate(value) for found in structure_problems(item, item_kind, f"{path}[{index}]")]
    return _msgspec_problem(value, kind, path)


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every string inside dicts and lists, with its JSON path."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, _key_path(path, str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


def _default_values(index: int, data: dict[str, Any], node_type: str) -> Iterator[tuple[str, str]]:
    """An output node's results without a `value` stand for `{{name}}`."""
    if node_type != "output" or not isinstance(data.get("outputs"), list):
        return
    for position, item in enumerate(data["outputs"]):
        if isinstance(item, dict) and isinstance(item.get("name"), str) and "value" not in item:
            yield node_path(index, f"data.outputs[{position}]"), "{{" + item["name"] + "}}"


def ancestors(defn: WorkflowDefinition, node_id: str) -> set[str]:
    """Every node with a path to this one (its outputs may be in scope when it runs in DAG mode)."""
    seen: set[str] = set()
    queue = [node_id]
    while queue:
        for source in predecessors(defn, queue.pop()):
            if source not in seen:
                seen.add(source)
                queue.append(source)
    return seen


class _Names(msgspec.Struct, frozen=True):
    """What a reference's first segment may name in one definition."""

    node_ids: frozenset[str]
    declared: tuple[str, ...]


def _reference_problem(names: _Names, reference: str, before: set[str] | None, where: str) -> str | None:
    """Why a reference cannot resolve where it stands (None when it can). `before`: None means any node."""
    try:
        head = split_path(reference)[0]
    except ValueError:
        return None  # a malformed path is reported by the template check
    if head in names.node_ids:
        if before is None or head in before:
            return None
        if where == f"node {head!r}":
            return f"{{{{{reference}}}}} refers to node {head!r} itself, whose output does not exist while it runs"
        return f"{{{{{reference}}}}} refers to node {head!r}, which does not run before {where}"
    if head in names.declared or head == UPLOADED_FILES:
        return None
    listed = ", ".join(names.declared) if names.declared else "none"
    return f"{{{{{reference}}}}} refers to {head!r}: no node has that id and no userInput node declares it (declared: {listed})"


def reference_problems(defn: WorkflowDefinition, raw: dict[str, Any]) -> list[Problem]:
    """Template references (in node data, output defaults and edge conditions) that cannot resolve where they stand."""
    problems: list[Problem] = []
    names = _Names(frozenset(node.id for node in defn.nodes), tuple(item.name for item in workflow_inputs(defn)))
    dag = defn.mode == "DAG"
    for index, node in enumerate(defn.nodes):
        before = ancestors(defn, node.id) if dag else None
        found = [*_strings(raw["nodes"][index].get("data", {}), node_path(index, "data"))]
        for path, text in [*found, *_default_values(index, node.data, node.type)]:
            for reference in references(text):
                problem = _reference_problem(names, reference, before, f"node {node.id!r}")
                if problem:
                    problems.append(Problem(path, problem))
    for index, edge in enumerate(defn.edges):
        before = ancestors(defn, edge.source) | {edge.source} if dag else None
        for reference in references(edge.condition or ""):
            problem = _reference_problem(names, reference, before, f"the condition of edge #{index}")
            if problem:
                problems.append(Problem(f"$.edges[{index}].condition", problem))
    return problems


def model_problems(defn: WorkflowDefinition, model_ids: Collection[str]) -> list[Problem]:
    """Model ids named by nodes or the planner that no configured model answers to."""
    known = ", ".join(model_ids)
    named = [
        (node_path(index, f"data.{key}"), node.data[key])
        for index, node in enumerate(defn.nodes) if node.type in MODEL_NODE_TYPES
        for key in MODEL_KEYS if isinstance(node.data.get(key), str) and node.data[key]
    ]
    if defn.planner.model_id:
        named.append(("$.planner.model_id", defn.planner.model_id))
    return [
        Problem(path, f"model {model_id!r} is not configured (configured: {known})")
        for path, model_id in named if model_id not in model_ids
    ]


def _action_problems(defn: WorkflowDefinition) -> list[Problem]:
    return [
        Problem(node_path(index, "data.actions"), f"smartAction node {node.id!r} needs at least one action")
        for index, node in enumerate(defn.nodes) if node.type == "smartAction" and not node.data.get("actions")
    ]


def definition_problems(raw: Any, *, model_ids: Collection[str] | None = None) -> list[Problem]:
    """Every problem of a definition (a parsed JSON value); model ids are checked when `model_ids` is given."""
    problems = structure_problems(raw, WorkflowDocument)
    try:
        defn = msgspec.convert(raw, WorkflowDefinition)
    except msgspec.ValidationError:
        return problems
    at = {problem.path for problem in problems}
    problems += [p for p in workflow_findings(defn) + _action_problems(defn) if p.path not in at]
    problems += reference_problems(defn, raw)
    if model_ids is not None:
        problems += model_problems(defn, model_ids)
    return problems


def definition_form(raw: Any) -> str:
    """The digest of the definition's canonical form ("" when it is not a sound authoring document)."""
    try:
        document = msgspec.convert(raw, WorkflowDocument)
    except msgspec.ValidationError:
        return ""
    return canonical_digest(canonical_form(document))


def duplicate_names(named: list[tuple[str, str]]) -> dict[str, str]:
    """For each source whose workflow name another source also uses: the problem, naming the others."""
    problems: dict[str, str] = {}
    for source, name in named:
        others = [other for other, same in named if same == name and other != source]
        if others:
            problems[source] = f"$.name: workflow name {name!r} is also used by {', '.join(others)}"
    return problems
