"""Benchmarks of the event-sourced core (not timed tests): each module prints comparable figures.

Run one with `python -m bench.<name>` or all with `python -m bench.run_all`; see docs/benchmarks.md.
"""
