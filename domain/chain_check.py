"""Checking a run's exported event lines against their hash chain, with no service and no store.

Each line's link is recomputed from the link of the line before it (as that line carries it)
and the line's own JSON, so one changed event is reported at its own position and the lines
after it still verify. A position that is missing is reported once, and the line after the gap
starts the check afresh from the link it carries. Lines stored before the chain began (no
`chain` member, at the start of a run) are counted, said, and not covered.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from uuid import UUID

import msgspec

from domain.chain import ChainMember, genesis, next_link, split_line


class _Head(msgspec.Struct):
    """What the check reads of an event's own JSON: whose it is and where it stands."""

    originator_id: UUID
    originator_version: int


_head = msgspec.json.Decoder(_Head)


class ChainProblem(msgspec.Struct, frozen=True):
    """One position that does not verify, and why."""

    position: int
    reason: str

    def __str__(self) -> str:
        return f"position {self.position}: {self.reason}"


@dataclass
class ChainReport:
    """What checking a run's lines found."""

    run_id: UUID | None = None
    events: int = 0
    head: str | None = None
    """The last link, in hex: a receipt to compare with what the service said before."""
    head_position: int = 0
    unchained_upto: int = 0
    """Positions 1..this were stored before the chain began and are not covered (0: every position is)."""
    erased: list[int] = field(default_factory=list)
    problems: list[ChainProblem] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        """True when every line verifies and no position is missing or out of place."""
        return self.events > 0 and not self.problems


class _Walk:
    """The state of a check between two lines."""

    def __init__(self) -> None:
        self.report = ChainReport()
        self.expected = 1
        self.link: bytes | None = None
        self.fresh = False
        """True when the next line's predecessor is unknown (after a gap): its link is taken as it is."""

    def problem(self, position: int, reason: str) -> None:
        self.report.problems.append(ChainProblem(position, reason))

    def line(self, number: int, raw: bytes) -> None:
        try:
            state, member = split_line(raw)
            head = _head.decode(state)
        except (msgspec.DecodeError, ValueError) as error:
            self.problem(self.expected, f"line {number} is not an event line ({error})")
            return
        report = self.report
        if report.run_id is None:
            report.run_id = head.originator_id
        elif head.originator_id != report.run_id:
            self.problem(head.originator_version, f"line {number} belongs to another run ({head.originator_id.hex})")
            return
        self.placed(head.originator_version, state, member)

    def placed(self, position: int, state: bytes, member: ChainMember | None) -> None:
        if position < self.expected:
            self.problem(position, f"out of order: it comes after position {self.expected - 1}")
            return
        if position > self.expected:
            also = "" if position == self.expected + 1 else f", and every position after it up to {position - 1}"
            self.problem(self.expected, f"missing{also} (the next line is position {position})")
            self.fresh = True
        self.report.events += 1
        self.expected = position + 1
        if member is None:
            self.unchained(position)
        else:
            self.chained(position, state, member)

    def unchained(self, position: int) -> None:
        if self.link is not None:
            self.problem(position, "has no chain link, though the chain began before it")
            self.fresh = True
        else:
            self.report.unchained_upto = position

    def chained(self, position: int, state: bytes, member: ChainMember) -> None:
        report = self.report
        assert report.run_id is not None
        try:
            link = bytes.fromhex(member.link)
            skeleton, content = member.digests(state)
        except ValueError as error:
            self.problem(position, f"its chain member is malformed ({error})")
            return
        previous = self.link if self.link is not None else genesis(report.run_id)
        if not self.fresh and next_link(previous, skeleton, content) != link:
            self.problem(position, "does not match its link (its content, type or place was changed)")
        self.link, self.fresh = link, False
        report.head, report.head_position = link.hex(), position
        if member.erased:
            report.erased.append(position)


def check_lines(lines: Iterable[bytes]) -> ChainReport:
    """Check a run's event lines, in the order given (blank lines are skipped)."""
    walk = _Walk()
    for number, raw in enumerate(lines, 1):
        if raw.strip():
            walk.line(number, raw)
    if walk.report.events == 0 and not walk.report.problems:
        walk.problem(1, "no event lines")
    return walk.report


def ranges(positions: list[int]) -> str:
    """Positions as short ranges: `1, 4-9, 12`."""
    spans: list[list[int]] = []
    for position in positions:
        if spans and position == spans[-1][1] + 1:
            spans[-1][1] = position
        else:
            spans.append([position, position])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans)
