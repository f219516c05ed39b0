"""Positions folded in their append's transaction: taken once each by the runner, bounded while it is away."""

from __future__ import annotations

from engine.readmodel.folded import FoldedHere


def test_a_position_folded_here_is_taken_once():
    folded = FoldedHere()
    folded.add([3, 4])
    assert folded.take(3) is True
    assert folded.take(3) is False
    assert folded.take(4) is True
    assert len(folded) == 0


def test_a_position_not_folded_here_is_not_taken():
    folded = FoldedHere()
    folded.add([5])
    assert folded.take(4) is False
    assert len(folded) == 1


def test_positions_the_runner_passed_are_dropped_when_the_bound_is_reached():
    folded = FoldedHere(kept_at_most=2)
    folded.add([1, 2])  # their append's commit failed: the runner never sees them
    folded.take(10)
    folded.add([11, 12])
    assert len(folded) == 2 and folded.take(11) and folded.take(12)


def test_no_more_positions_are_kept_beyond_the_bound_while_the_runner_is_away():
    folded = FoldedHere(kept_at_most=2)
    folded.add([1, 2])
    folded.add([3])
    assert len(folded) == 2
    assert folded.take(3) is False  # the runner folds it itself
