"""The `flowtrail` command: serve, demo, audit, export, runs."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from scripts.connect import add_connection_options, run_id
from scripts.runs import add_runs_commands, run_runs_command


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run one sub-command."""
    parser = argparse.ArgumentParser(prog="flowtrail", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    commands.add_parser("serve", help="run the HTTP service (settings from FLOWTRAIL_* variables)")

    demo = commands.add_parser("demo", help="start a demo run through the HTTP API and print its stream")
    demo.add_argument("workflow", nargs="?", default="demo-report")
    add_connection_options(demo)

    export = commands.add_parser("export", help="write a run's events as JSON Lines (read from the service)")
    export.add_argument("run_id", type=run_id)
    export.add_argument("-o", "--output", default="-", help="file to write (default: standard output)")
    add_connection_options(export)

    audit = commands.add_parser("audit", help="rebuild a run's projections from its events and diff them with the service")
    audit.add_argument("run_id", type=run_id)
    add_connection_options(audit)

    add_runs_commands(commands)

    args = parser.parse_args(argv)
    if args.command == "serve":
        from scripts.serve import serve

        return serve()
    if args.command == "demo":
        from scripts.demo import demo as run_demo

        return run_demo(args.workflow, url=args.url, key=args.key)
    if args.command == "export":
        from scripts.export import export_run

        return export_run(args.run_id, args.output, url=args.url, key=args.key)
    if args.command == "audit":
        from scripts.audit import audit_run

        return audit_run(args.run_id, url=args.url, key=args.key)
    if args.command == "runs":
        return run_runs_command(args)
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
