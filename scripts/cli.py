"""The `flowtrail` command: serve, demo, audit, export, hermes check."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run one sub-command."""
    parser = argparse.ArgumentParser(prog="flowtrail", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    commands.add_parser("serve", help="run the HTTP service (settings from FLOWTRAIL_* variables)")

    demo = commands.add_parser("demo", help="start a demo run through the HTTP API and print its stream")
    demo.add_argument("workflow", nargs="?", default="demo-report")

    export = commands.add_parser("export", help="write a run's events as JSON Lines")
    export.add_argument("run_id")
    export.add_argument("-o", "--output", default="-", help="file to write (default: standard output)")

    audit = commands.add_parser("audit", help="rebuild a run's projections from the log and diff them with the service")
    audit.add_argument("run_id")
    audit.add_argument("--url", default=None, help="base URL of the running service (default: from FLOWTRAIL_HOST/PORT)")
    audit.add_argument("--key", default=None, help="API key (default: FLOWTRAIL_AUDIT_KEY, else the first configured key)")

    hermes = commands.add_parser("hermes", help="remote Hermes Agent gateways")
    hermes_commands = hermes.add_subparsers(dest="hermes_command", required=True)
    hermes_check = hermes_commands.add_parser("check", help="probe each configured gateway (exit 1 unless all are ok)")
    hermes_check.add_argument("gateway", nargs="?", default=None, help="only this gateway id")

    args = parser.parse_args(argv)
    if args.command == "serve":
        from scripts.serve import serve

        return serve()
    if args.command == "demo":
        from scripts.demo import demo as run_demo

        return run_demo(args.workflow)
    if args.command == "export":
        from scripts.export import export_run

        return export_run(args.run_id, args.output)
    if args.command == "audit":
        from scripts.audit import audit_run

        return audit_run(args.run_id, url=args.url, key=args.key)
    if args.command == "hermes":
        from scripts.hermes import check_gateways

        return check_gateways(args.gateway)
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
