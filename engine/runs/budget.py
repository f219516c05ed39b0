"""How many stream chunks the runs of this process may buffer ahead of the store, shared by those streaming now.

A producer that never waits (a scripted model at zero pace, a burst from a network buffer) fills its
run's buffer faster than the store and the streams take it; every chunk then waits behind the ones
buffered before it, and fifty such runs make every run's first events wait behind the others'
backlogs. The budget bounds the backlog of the whole process (`FLOWTRAIL_STREAM_AHEAD_CHUNKS`): runs
streaming together share it, none below `least` (a 32nd of the budget, at most 32) and none above the most
one run may buffer (`FLOWTRAIL_STREAM_RUN_AHEAD_CHUNKS`), also when it streams alone. A run whose buffer is
at its share hands the buffer to the store and waits until the append before it is stored. A smaller budget
trades throughput for latency: with 256, fifty runs at zero pace had their delay p99 halved and their first
events a quarter sooner, for 35-45 % fewer events a second (docs/benchmarks.md).
"""

from __future__ import annotations

DEFAULT_AHEAD_CHUNKS = 1024
DEFAULT_RUN_AHEAD_CHUNKS = 384
"""The most one run buffers even when it streams alone: the delay of its chunks is about two appends of that many
(one stored while the next is buffered): 43 ms at p99 where 1,024 gave 93-126 on a slow machine (decision 0048)."""
LEAST_AHEAD_CHUNKS = 32
"""The floor of a run's share (for budgets of 1,024 chunks and more)."""
LEAST_PART_OF_BUDGET = 32
"""A smaller budget lowers that floor to this part of it (a 32nd), so a small budget still bounds many runs."""


class StreamBudget:
    """The stream chunks buffered ahead of the store, shared by the runs holding some now."""

    def __init__(self, chunks: int = DEFAULT_AHEAD_CHUNKS, *, least: int = LEAST_AHEAD_CHUNKS,
                 per_run: int | None = None) -> None:
        self.chunks = chunks
        self.per_run = chunks if per_run is None else per_run
        self.least = max(1, min(least, chunks // LEAST_PART_OF_BUDGET))
        self._holding: set[int] = set()

    def holds(self, writer: object) -> None:
        """A writer buffered its first chunk since its buffer was last taken."""
        self._holding.add(id(writer))

    def released(self, writer: object) -> None:
        """A writer's buffer was taken (or dropped)."""
        self._holding.discard(id(writer))

    def share(self) -> int:
        """The chunks one run may buffer now."""
        return min(self.per_run, max(self.least, self.chunks // max(1, len(self._holding))))
