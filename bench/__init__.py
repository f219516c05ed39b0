"""Benchmarks of the event-sourced core (not timed tests): each module prints comparable figures.

Run one with `python -m bench.<name>` or all with `python -m bench.run_all`; see docs/benchmarks.md.

What the bench modules share: `fleet` (an orchestrator's processes and stores) over `channel`
(the JSON-lines command channel); the worker processes `host` (the server plus commands) and
`client` (SSE clients); `frames` (what clients record, and the delays from it); `service` (the
one module that knows `engine.bootstrap.Services`); `stores`, `names`, `figures` (percentiles,
tables), `machine` (ports, CPU, memory, waiting for a quiet machine) and `cli` (`--store`, uvloop).
"""
