"""`flowtrail runs create | list | show | watch | cancel | answer | fork | rerun | forks | erase`: run operations
through the Python client.

Every sub-command takes `--url`/`--key` (else FLOWTRAIL_API_KEY, else the key `flowtrail demo` uses) and `--json`
(the API's answer as JSON instead of text).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Any, TextIO

import msgspec

from domain.failures import FAILURE_CODES
from flowtrail_client import TERMINAL_STATUSES, FlowtrailClient, RunPage, RunView, StreamEvent
from scripts.connect import add_connection_options, command_key, connect, reported, run_id
from scripts.forks import add_fork_commands
from scripts.run_variables import VariablesRefused, read_files, run_variables

Command = Callable[[FlowtrailClient, argparse.Namespace], Awaitable[int]]
STATUSES = ("CREATED", "RUNNING", "SUCCESS", "FAILED", "WAITING")


def print_json(value: Any) -> None:
    """One answer as JSON on standard output."""
    print(msgspec.json.encode(value).decode())


async def create_run(client: FlowtrailClient, args: argparse.Namespace) -> int:
    """Create a run of a workflow with checked variables (and files), start it, and watch it with `--watch`."""
    found = [w for w in await client.workflows() if args.workflow in (w.workflow_name, str(w.workflow_id))]
    if not found:
        print(f"error: WORKFLOW_NOT_FOUND: no workflow {args.workflow!r} this key may run", file=sys.stderr)
        return 1
    try:
        variables = run_variables(found[0], args.var or [])
        files = read_files(args.file or [])
    except VariablesRefused as refused:
        print(f"error: {refused}", file=sys.stderr)
        return 2
    created = await client.create(found[0].workflow_name, variables, files=files)
    started = await client.start(created)
    if args.json and not args.watch:
        print_json(started)
    elif not args.json:
        print(f"run {created.run_id} of {created.workflow_name} started; follow it: flowtrail runs watch {created.run_id}")
    if not args.watch:
        return 0
    args.run_id, args.after = created.run_id, 0
    return await watch_run(client, args)


async def list_runs(client: FlowtrailClient, args: argparse.Namespace) -> int:
    """One page of runs, newest first."""
    page = await client.list(status=args.status, workflow=args.workflow, created_after=args.created_after,
                             created_before=args.created_before, limit=args.limit, cursor=args.cursor,
                             error_code=args.error_code)
    if args.json:
        print_json(page)
    else:
        print_page(page)
    return 0


def print_page(page: RunPage) -> None:
    """A table of runs, and how to ask for the next page."""
    print(f"{'RUN':32}  {'WORKFLOW':24} {'STATUS':8} {'CREATED':24} TOKENS  NOTE")
    for run in page.items:
        tokens = run.prompt_tokens + run.completion_tokens
        note = f"waiting for an answer since {run.waiting_since}" if run.waiting_for_answer else run.error_code or ""
        print(f"{run.run_id:32}  {run.workflow_name[:24]:24} {run.status:8} {run.created_at or '-':24} {tokens:<6}  "
              f"{note}".rstrip())
    if page.next_cursor:
        print(f"more: flowtrail runs list --cursor {page.next_cursor}")


async def show_run(client: FlowtrailClient, args: argparse.Namespace) -> int:
    """A run's status, times, nodes and outputs."""
    run = await client.get(args.run_id)
    if args.json:
        print_json(run)
    else:
        print_run(run)
    return 0


def print_run(run: RunView) -> None:
    """A run as readable lines."""
    cancel = " (cancelled)" if run.cancelled else " (cancel requested)" if run.cancel_requested else ""
    print(f"run {run.run_id} of {run.workflow_name}: {run.status}{cancel}")
    print(f"  created {run.created_at or '-'}, started {run.started_at or '-'}, completed {run.completed_at or '-'}")
    if run.error:
        print(f"  error ({run.error_code}): {run.error}" if run.error_code else f"  error: {run.error}")
    pause = run.current_pause
    if run.waiting_for_answer and pause is not None:
        print(f"  waiting for an answer since {run.waiting_since}, at node {pause.node_id}: {pause.question}")
        for number, choice in enumerate(pause.choices, start=1):
            print(f"    {number}. {choice}")
        print(f"  answer it: flowtrail runs answer {run.run_id} ANSWER")
    for node in run.nodes:
        print(f"  [{node.node_id}] {node.status} ({node.node_type}: {node.label})" + (f" - {node.error}" if node.error else ""))
    if run.outputs:
        print(f"  outputs: {msgspec.json.encode(run.outputs).decode()[:400]}")
    print(f"  workspace: {run.workspace.file_count} files, {run.workspace.total_bytes} bytes")


class Progress:
    """What a watched run has done so far: visits ended, the node running now, messages received."""

    def __init__(self) -> None:
        self.visits_done = 0
        self.current: str | None = None
        self.events = 0
        self.outcome: str | None = None

    def add(self, message: StreamEvent) -> None:
        """Count one stream message."""
        self.events += 1
        status = message.data.get("status")
        if message.event == "node_status" and status == "RUNNING":
            self.current = message.data.get("nodeId")
        elif message.event == "node_status":
            self.visits_done += 1
        if message.terminal:
            self.current, self.outcome = None, message.event

    def stage(self) -> tuple[int, str | None]:
        """Visits done and the node running now (what a change of stage is)."""
        return self.visits_done, self.current

    def line(self) -> str:
        """The progress line."""
        return f"visits done {self.visits_done}, current node {self.current or '-'}, events {self.events}"


class ProgressLine:
    """Shows the progress line, rewritten in place on a terminal, one line per change elsewhere."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.shown = ""
        self.stage: tuple[int, str | None] | None = None

    def show(self, progress: Progress) -> None:
        """Show the line (on a terminal, at every message; elsewhere, when the stage changes)."""
        self.shown = progress.line()
        if self.out.isatty():
            self.out.write(f"\r{self.shown}\x1b[K")
            self.out.flush()
        elif progress.stage() != self.stage:
            print(self.shown, file=self.out, flush=True)
        self.stage = progress.stage()

    def end(self) -> None:
        """Finish the line on a terminal."""
        if self.out.isatty() and self.shown:
            print(file=self.out)


async def watch_run(client: FlowtrailClient, args: argparse.Namespace) -> int:
    """Follow a run until it ends (resuming after drops); 0 when it completed."""
    progress, shown = Progress(), ProgressLine(sys.stderr)
    async with aclosing(client.stream(args.run_id, after=args.after)) as messages:
        async for message in messages:
            progress.add(message)
            if args.json:
                print_json(message)
            shown.show(progress)
    shown.end()
    if not args.json:
        print(f"run {args.run_id} ended: {progress.outcome} after {progress.events} events")
    return 0 if progress.outcome == "workflow_complete" else 1


async def cancel_run(client: FlowtrailClient, args: argparse.Namespace) -> int:
    """Ask for a run to be cancelled."""
    result = await client.cancel(args.run_id)
    if args.json:
        print_json(result)
    else:
        print(f"run {result.run_id}: cancel {result.outcome}; status {result.status}, cancelled {result.cancelled}")
    return 0


async def erase_run(client: FlowtrailClient, args: argparse.Namespace) -> int:
    """Erase an ended run's content (its skeleton and hash chain stay)."""
    result = await client.erase(args.run_id)
    if args.json:
        print_json(result)
    else:
        done = "erased" if result.outcome == "ERASED" else "was already erased"
        print(f"run {result.run_id} {done} at {result.erased_at} by {result.erased_by} "
              f"({result.events_erased} events emptied)")
    return 0


async def answer_run(client: FlowtrailClient, args: argparse.Namespace) -> int:
    """Answer the question a run waits on (the current one, unless --clarify-id names another)."""
    clarify_id = args.clarify_id
    if clarify_id is None:
        state = await client.state(args.run_id)
        if state.current_pause is None:
            done = "has ended" if state.status in TERMINAL_STATUSES else "waits on no question"
            print(f"error: run {args.run_id} {done} (status {state.status})", file=sys.stderr)
            return 1
        clarify_id = state.current_pause.clarify_id
    result = await client.answer(args.run_id, clarify_id, args.answer)
    if args.json:
        print_json(result)
    else:
        taken = "taken up" if result.accepted else "stored (answered before, or the run takes it up later)"
        print(f"run {result.run_id}: answer to {result.clarify_id} {taken}")
    return 0


def add_runs_commands(commands: Any) -> None:
    """Register `flowtrail runs ...` on the `flowtrail` sub-parsers."""
    runs = commands.add_parser("runs", help="create, list, show, watch, cancel, answer, fork, re-run and erase runs of a running service")
    runs.set_defaults(run=run_runs_command)
    actions = runs.add_subparsers(dest="action", required=True)

    def action(name: str, command: Command, help_text: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = actions.add_parser(name, help=help_text)
        add_connection_options(parser)
        parser.add_argument("--json", action="store_true", help="print the API's answer as JSON")
        parser.set_defaults(runs_command=command)
        return parser

    create = action("create", create_run, "create and start a run of a workflow, its variables checked first")
    create.add_argument("workflow", help="the workflow's name (or numeric id)")
    create.add_argument("--var", action="append", metavar="NAME=VALUE",
                        help="a run variable, typed as the workflow declares it (repeatable; JSON for arrays, objects)")
    create.add_argument("--file", action="append", metavar="PATH", help="a file for the run's workspace (repeatable)")
    create.add_argument("--watch", action="store_true", help="follow the run until it ends (exit 0 when it completed)")
    listing = action("list", list_runs, "the runs the key may see, newest first")
    listing.add_argument("--status", action="append", choices=STATUSES,
                         help="only runs in this status (repeatable); WAITING: runs waiting for an answer")
    listing.add_argument("--error-code", action="append", choices=FAILURE_CODES,
                         help="only failed runs of this failure category (repeatable)")
    listing.add_argument("--workflow", help="only runs of this workflow")
    listing.add_argument("--created-after", help="ISO 8601 time with offset or Z")
    listing.add_argument("--created-before", help="ISO 8601 time with offset or Z")
    listing.add_argument("--limit", type=int, help="runs per page (1..200, default 50)")
    listing.add_argument("--cursor", help="the cursor a previous page printed")
    action("show", show_run, "a run's status, nodes and outputs").add_argument("run_id", type=run_id)
    watch = action("watch", watch_run, "follow a run's stream until it ends, with a progress line")
    watch.add_argument("run_id", type=run_id)
    watch.add_argument("--after", type=int, default=0, help="start after this event id (Last-Event-ID)")
    action("cancel", cancel_run, "ask for a run to be cancelled").add_argument("run_id", type=run_id)
    action("erase", erase_run, "erase an ended run's content (its skeleton and hash chain stay)").add_argument(
        "run_id", type=run_id)
    answer = action("answer", answer_run, "answer the question a run waits on")
    answer.add_argument("run_id", type=run_id)
    answer.add_argument("answer")
    answer.add_argument("--clarify-id", help="the question to answer (default: the one the run waits on now)")
    add_fork_commands(action)


def run_runs_command(args: argparse.Namespace) -> int:
    """Run the parsed `flowtrail runs` sub-command."""
    command: Command = args.runs_command

    async def work() -> int:
        async with connect(args.url, command_key(args.key)) as client:
            return await command(client, args)

    return reported(work)
