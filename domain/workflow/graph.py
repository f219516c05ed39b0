"""The graph rules of a definition: an order that puts every edge forward, cycles, reachability, ancestry."""

from __future__ import annotations

from collections.abc import Callable

from domain.errors import GraphInvalid
from domain.workflow.definition import WorkflowDefinition, predecessors, successors, valid_edges


def topological_order(defn: WorkflowDefinition) -> list[str]:
    """Node ids so that every edge points forward (ties in node order); GraphInvalid on a cycle."""
    order, edges = list(dict.fromkeys(node.id for node in defn.nodes)), valid_edges(defn)
    result: list[str] = []
    while len(result) < len(order):
        done = set(result)
        ready = [n for n in order if n not in done and all(e.source in done for e in edges if e.target == n)]
        if not ready:
            break
        result.append(ready[0])
    if len(result) < len(order):
        raise GraphInvalid(cycle_messages(defn) or ["workflow graph has a self-loop"], workflow=defn.name)
    return result


def _adjacency(defn: WorkflowDefinition) -> dict[str, list[str]]:
    adjacency: dict[str, list[str]] = {node.id: [] for node in defn.nodes}
    for edge in valid_edges(defn):
        if edge.source != edge.target and edge.target not in adjacency[edge.source]:
            adjacency[edge.source].append(edge.target)
    return adjacency


def cycles(defn: WorkflowDefinition) -> list[list[str]]:
    """One cycle (as a closed path) per back edge found by depth-first search, self-loops excluded."""
    adjacency = _adjacency(defn)
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


def cycle_messages(defn: WorkflowDefinition) -> list[str]:
    """Each cycle of a DAG, named by its nodes."""
    return [f"cycle in DAG mode: {' -> '.join(cycle)}" for cycle in cycles(defn)]


def _closure(starts: list[str], step: Callable[[str], list[str]]) -> set[str]:
    """Every node a chain of one or more steps leads to from the starts."""
    seen: set[str] = set()
    queue = list(starts)
    while queue:
        for nxt in step(queue.pop()):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return seen


def reachable(defn: WorkflowDefinition, starts: list[str]) -> set[str]:
    """Every node a path leads to from the start nodes (the starts included)."""
    return set(starts) | _closure(starts, lambda node_id: successors(defn, node_id))


def ancestors(defn: WorkflowDefinition, node_id: str) -> set[str]:
    """Every node with a path to this one (its outputs may be in scope when it runs in DAG mode)."""
    return _closure([node_id], lambda target: predecessors(defn, target))


def descendants(defn: WorkflowDefinition, node_id: str) -> set[str]:
    """Every node a path from this one leads to (in DAG mode, what depends on its output)."""
    return _closure([node_id], lambda source: successors(defn, source))
