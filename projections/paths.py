"""Predecessor paths (§2.1): every chain of earlier visits that leads to a visit."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from projections.payloads import PathChain, PredecessorPaths
from projections.visits import Visit, Visits

MAX_PATHS = 100
MAX_PATH_DEPTH = 200


def predecessor_paths(
    index: Visits, visit_uuid: str, *, max_paths: int = MAX_PATHS, max_depth: int = MAX_PATH_DEPTH
) -> PredecessorPaths:
    """The §2.1 body for one visit: its chains, their visits in sortOrder, back-edges, truncation."""
    target = index.get(visit_uuid)
    chains, truncated = _chains(index, target, max_paths, max_depth)
    on_paths = {visit.visit_uuid: visit for chain in chains for visit in chain}
    ordered = sorted(on_paths.values(), key=lambda visit: visit.order)
    edge_keys: dict[str, None] = {}
    paths = []
    for chain in chains:
        keys = _back_edge_keys(chain)
        edge_keys.update(dict.fromkeys(keys))
        paths.append(PathChain(
            sequence=[visit.node_id for visit in chain],
            visit_uuids=[visit.visit_uuid for visit in chain],
            has_backtrack=bool(keys),
        ))
    return PredecessorPaths(
        visit_uuids=[visit.visit_uuid for visit in ordered],
        node_ids=[visit.node_id for visit in ordered],
        paths=paths,
        backtrack_edge_keys=list(edge_keys),
        truncated=truncated,
    )


def _chains(index: Visits, target: Visit, max_paths: int, max_depth: int) -> tuple[list[list[Visit]], bool]:
    """Chains oldest-first ending at `target`, by an iterative depth-first walk backwards."""
    chains: list[list[Visit]] = []
    truncated = False
    walk: list[Visit] = [target]  # newest first
    on_walk = {target.visit_uuid}
    frames: list[list[Any]] = [[_predecessors(index, target, on_walk), False]]  # [iterator, went further]
    while frames:
        frame = frames[-1]
        step = next(frame[0], None)
        if step is not None and len(walk) < max_depth:
            frame[1] = True
            walk.append(step)
            on_walk.add(step.visit_uuid)
            frames.append([_predecessors(index, step, on_walk), False])
            continue
        if step is not None:
            truncated = True  # cut at the oldest end
        if not frame[1]:
            if len(chains) == max_paths:
                return chains, True
            chains.append(walk[::-1])
        frames.pop()
        on_walk.discard(walk.pop().visit_uuid)
    return chains, truncated


def _predecessors(index: Visits, visit: Visit, on_walk: set[str]) -> Iterator[Visit]:
    """Known predecessors of a visit that are not already on the walk (no cycles)."""
    for uuid in visit.predecessors:
        predecessor = index.find(uuid)
        if predecessor is not None and uuid not in on_walk:
            yield predecessor


def _back_edge_keys(chain: list[Visit]) -> list[str]:
    """`"U->V"` for each step into a revisit (V's iterSeq > 1)."""
    return [f"{u.node_id}->{v.node_id}" for u, v in zip(chain, chain[1:]) if v.iter_seq > 1]
