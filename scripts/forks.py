"""`flowtrail runs fork | rerun | forks`: a new run from another run's history, and the list of a run's forks.

`fork` and `rerun` create the new run and start it (`--no-start`: create only), then print its id and
where it came from (`--json`: the API's answer, with the status after the start); `runs watch NEW_ID`
follows it.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

import msgspec

from flowtrail_client import FlowtrailClient, ForkedRun
from scripts.connect import run_id

ActionFactory = Callable[..., argparse.ArgumentParser]


def variable(text: str) -> tuple[str, Any]:
    """`--var name=value`: the value as JSON when it is JSON (5, true, ["a"]), else as text."""
    name, equals, value = text.partition("=")
    if not equals or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not name=value")
    try:
        return name, json.loads(value)
    except ValueError:
        return name, value


async def fork_run(client: FlowtrailClient, args: argparse.Namespace) -> int:
    """Fork a run at a node's latest finished visit (or a visit), optionally under another version, and start it."""
    forked = await client.fork(
        args.run_id, from_node=args.from_node, from_visit=args.from_visit, workflow_version=args.version,
        variables=dict(args.var or []), idempotency_key=args.idempotency_key,
    )
    return await started(client, forked, args)


async def rerun_run(client: FlowtrailClient, args: argparse.Namespace) -> int:
    """Re-run a failed or cancelled run from its first failed visit, and start it."""
    forked = await client.rerun(args.run_id, idempotency_key=args.idempotency_key)
    return await started(client, forked, args)


async def started(client: FlowtrailClient, forked: ForkedRun, args: argparse.Namespace) -> int:
    """Start the new run unless told not to, and say what it is."""
    status = forked.status if args.no_start else (await client.start(forked)).status
    if args.json:
        print(msgspec.json.encode(msgspec.structs.replace(forked, status=status)).decode())
    else:
        source = forked.forked_from
        where = f"visit {source.visit_uuid}" if source.visit_uuid else "its end"
        print(f"run {forked.run_id} ({status}) forked from run {source.run_id} at {where} (position {source.position})")
        print(f"follow it: flowtrail runs watch {forked.run_id}")
    return 0


async def list_forks(client: FlowtrailClient, args: argparse.Namespace) -> int:
    """The runs forked from a run, newest first, one page."""
    page = await client.forks(args.run_id, limit=args.limit, cursor=args.cursor)
    if args.json:
        print(msgspec.json.encode(page).decode())
        return 0
    for item in page.items:
        print(f"{item.run_id}  {item.status:8} {item.created_at or '-'}")
    if page.next_cursor:
        print(f"more: flowtrail runs forks {args.run_id} --cursor {page.next_cursor}")
    return 0


def add_fork_commands(action: ActionFactory) -> None:
    """Register `runs fork`, `runs rerun` and `runs forks` (`action` makes a `runs` sub-command's parser)."""
    fork = action("fork", fork_run, "fork a run at a node's latest finished visit (or --from-visit) and start it")
    fork.add_argument("run_id", type=run_id)
    where = fork.add_mutually_exclusive_group(required=True)
    where.add_argument("--from-node", help="the node whose latest finished visit the fork runs again")
    where.add_argument("--from-visit", help="the visit (its uuid) the fork runs again")
    fork.add_argument("--version", type=int, help="a published version of the workflow to run from there")
    fork.add_argument("--var", action="append", type=variable, metavar="NAME=VALUE",
                      help="override a variable (repeatable; the value is read as JSON when it is JSON)")
    rerun = action("rerun", rerun_run, "re-run a failed or cancelled run from its first failed visit and start it")
    rerun.add_argument("run_id", type=run_id)
    for parser in (fork, rerun):
        parser.add_argument("--no-start", action="store_true", help="create the new run only")
        parser.add_argument("--idempotency-key", help="repeat the request safely (the same key answers the same run)")
    forks = action("forks", list_forks, "the runs forked from a run, newest first")
    forks.add_argument("run_id", type=run_id)
    forks.add_argument("--limit", type=int, help="runs per page (1..200, default 50)")
    forks.add_argument("--cursor", help="the cursor a previous page printed")
