"""`flowtrail verify FILE`: check a run's export against its hash chain, offline (no service, no store).

Exit status 0: every line verifies; the run id, the number of events and the head link are
printed (and which positions precede the chain or are erased). 1: the first position that does
not verify is named first, then every other one; or the file cannot be read.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from domain.chain_check import ChainReport, check_lines, ranges


def verify_file(path: str) -> int:
    """Check an export file (`-`: standard input); print what was found; 0 when it verifies."""
    try:
        lines: Iterable[bytes] = sys.stdin.buffer if path == "-" else Path(path).read_bytes().splitlines()
        report = check_lines(lines)
    except OSError as error:
        print(f"error: cannot read {path}: {error.strerror or error}", file=sys.stderr)
        return 1
    for line in summary(report):
        print(line)
    return 0 if report.verified else 1


def summary(report: ChainReport) -> list[str]:
    """What a check found, as lines: problems first (the first position first), else the receipt."""
    if report.problems:
        first = report.problems[0]
        return [*(str(problem) for problem in report.problems),
                f"FAILED: {len(report.problems)} problem(s); the first at position {first.position}"]
    assert report.run_id is not None
    lines = [f"run {report.run_id.hex}: {report.events} events, head {report.head or '-'} "
             f"at position {report.head_position}"]
    if report.unchained_upto:
        lines.append(f"positions 1-{report.unchained_upto} were stored before the hash chain began: not covered")
    if report.erased:
        lines.append(f"erased: positions {ranges(report.erased)} (content removed; their skeletons verify)")
    lines.append("OK: every event verifies")
    return lines
