"""Figures and tables: percentiles, units, verdicts against targets, aligned text tables."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of unsorted values; nan when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100.0 * len(ordered) + 0.5) - 1))
    return ordered[k]


def median(values: Sequence[float]) -> float:
    """The middle value (nan when empty)."""
    return percentile(values, 50)


def ms(seconds: float) -> float:
    """Seconds to milliseconds."""
    return seconds * 1000.0


def fmt(value: Any) -> str:
    """A figure for a table: thousands separators, sensible decimals."""
    if isinstance(value, bool) or value is None:
        return "-" if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 100:
            return f"{value:.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    return str(value)


def print_table(
    title: str, rows: list[dict[str, Any]], columns: Sequence[str] | None = None
) -> None:
    """Rows of dicts as an aligned text table under a title."""
    print()
    print(f"== {title}")
    if not rows:
        print("(no rows)")
        return
    columns = list(columns or rows[0].keys())
    cells = [[fmt(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print(
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(columns, widths))
        )
    )
    print("  ".join("-" * w for w in widths))
    for r in cells:
        print(
            "  ".join(
                v.ljust(w) if i == 0 else v.rjust(w)
                for i, (v, w) in enumerate(zip(r, widths))
            )
        )
    sys.stdout.flush()


def verdict(value: float, target: float, *, at_least: bool) -> str:
    """'ok' or 'MISS' against a target."""
    if math.isnan(value):
        return "-"
    good = value >= target if at_least else value <= target
    return "ok" if good else "MISS"
