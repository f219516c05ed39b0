"""Template references in a definition that cannot resolve where they stand, or are malformed, each at its JSON path."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

from domain.templates import references, split_path
from domain.workflow.definition import WorkflowDefinition, workflow_inputs
from domain.workflow.graph import ancestors
from domain.workflow.nodes import OutputNode
from domain.workflow.structure import Problem, key_path

UPLOADED_FILES = "uploadedFiles"
"""The variable every run has: the paths of its uploaded files."""


def node_path(index: int, *keys: str) -> str:
    """The JSON path of a node (or of a key inside it)."""
    return "".join([f"$.nodes[{index}]", *(f".{key}" for key in keys)])


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every string inside dicts and lists, with its JSON path."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, key_path(path, str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


def _default_values(index: int, node: Any) -> Iterator[tuple[str, str]]:
    """An output node's results without a `value` stand for `{{name}}`."""
    if not isinstance(node, OutputNode):
        return
    for position, item in enumerate(node.data.outputs):
        if item.value is msgspec.UNSET:
            yield node_path(index, f"data.outputs[{position}]"), item.template


class _Names(msgspec.Struct, frozen=True):
    """What a reference's first segment may name in one definition."""

    node_ids: frozenset[str]
    declared: tuple[str, ...]


def _reference_problem(names: _Names, reference: str, before: set[str] | None, where: str, *, syntax: bool) -> str | None:
    """Why a reference cannot resolve where it stands (None when it can). `before`: None means any node.

    `syntax`: a malformed path is a problem here too (a condition's own parser reports it otherwise).
    """
    try:
        head = split_path(reference)[0]
    except ValueError as error:
        return str(error) if syntax else None
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


def _problems_in(
    names: _Names, texts: list[tuple[str, str]], before: set[str] | None, where: str, *, syntax: bool = True,
) -> list[Problem]:
    return [
        Problem(path, problem) for path, text in texts for reference in references(text)
        if (problem := _reference_problem(names, reference, before, where, syntax=syntax))
    ]


def reference_problems(defn: WorkflowDefinition, raw: dict[str, Any]) -> list[Problem]:
    """References (in node data, output defaults and edge conditions) that are malformed or cannot resolve where they stand."""
    problems: list[Problem] = []
    names = _Names(frozenset(node.id for node in defn.nodes), tuple(item.name for item in workflow_inputs(defn)))
    dag = defn.mode == "DAG"
    for index, node in enumerate(defn.nodes):
        before = ancestors(defn, node.id) if dag else None
        texts = [*_strings(raw["nodes"][index].get("data", {}), node_path(index, "data")), *_default_values(index, node)]
        problems += _problems_in(names, texts, before, f"node {node.id!r}")
    for index, edge in enumerate(defn.edges):
        before = ancestors(defn, edge.source) | {edge.source} if dag else None
        texts = [(f"$.edges[{index}].condition", edge.condition or "")]
        problems += _problems_in(names, texts, before, f"the condition of edge #{index}", syntax=False)
    return problems
