"""The `flowtrail` command: serve, demo, audit, export, verify, runs, config, rebuild-read-model, validate, hermes."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from functools import partial
from importlib.metadata import version

from engine.catalogue import DEMO_DIR
from engine.config import SettingsError
from engine.store import StoreUnreachable
from scripts.connect import add_connection_options, os_error, run_id
from scripts.runs import add_runs_commands

SETTINGS_REFERENCE = (
    "Settings come from FLOWTRAIL_* environment variables only, read strictly at start-up (an unknown variable or "
    "a bad value stops it in one line, exit status 2). `flowtrail config` prints the effective settings, "
    "`flowtrail config --reference` describes every variable (README.md, \"Configuration\"); "
    "docs/operations.md is the deployment guide."
)


def demo_workflows() -> str:
    """The shipped demo workflows, one line each: name and description."""
    lines = []
    for path in sorted(DEMO_DIR.glob("*.json")):
        definition = json.loads(path.read_text(encoding="utf-8"))
        lines.append(f"  {definition['name']:<14} {definition.get('description', '')}")
    return "demo workflows:\n" + "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; a bad setting or an unreachable store is one line on stderr and exit status 2, a file
    that cannot be read or written one line and 1, Ctrl-C 130, a closed standard output (`| head`) nothing."""
    try:
        return run_command(argv)
    except (SettingsError, StoreUnreachable) as error:
        print(error, file=sys.stderr)
        return 2
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as error:
        print(f"error: {os_error(error)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def run_command(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run one sub-command."""
    args = command_parser().parse_args(argv)
    command: Callable[[argparse.Namespace], int] = args.run
    return command(args)


def command_parser() -> argparse.ArgumentParser:
    """The `flowtrail` parser; each sub-command's parser names the function that runs it (`run`)."""
    parser = argparse.ArgumentParser(prog="flowtrail", description=__doc__, epilog=SETTINGS_REFERENCE)
    parser.add_argument("--version", action="version", version=f"flowtrail {version('flowtrail')}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the HTTP service (settings from FLOWTRAIL_* variables)",
                                description="Run the HTTP service.", epilog=SETTINGS_REFERENCE)
    serve.set_defaults(run=_serve)

    demo = commands.add_parser("demo", help="start a demo run through the HTTP API and print its stream",
                               description="Start a run through the HTTP API of a running service and print its "
                               "stream as it arrives.", epilog=demo_workflows(),
                               formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_argument("workflow", nargs="?", default=None,
                      help="workflow name (default: FLOWTRAIL_DEMO_WORKFLOW, else demo-report)")
    add_connection_options(demo)
    demo.set_defaults(run=_demo)

    config = commands.add_parser("config", help="print the effective settings (secrets masked)",
                                 epilog=SETTINGS_REFERENCE)
    config.add_argument("--json", action="store_true", help="as one JSON object: variable -> {value, source}")
    config.add_argument("--reference", action="store_true", help="every variable as a Markdown table (the README's)")
    config.set_defaults(run=_config)

    export = commands.add_parser("export", help="write a run's events as JSON Lines (read from the service)")
    export.add_argument("run_id", type=run_id)
    export.add_argument("-o", "--output", default="-", help="file to write (default: standard output)")
    add_connection_options(export)
    export.set_defaults(run=_export)

    verify = commands.add_parser(
        "verify", help="check a run's export against its hash chain, offline (no service, no store)",
        description="Check an export (`flowtrail export`, GET .../events) against its hash chain (docs/history.md). "
        "Exit 0 and print the run id, the number of events and the head link; exit 1 naming the first position "
        "that does not verify.",
    )
    verify.add_argument("file", metavar="FILE", help="the export, one event a line (`-`: standard input)")
    verify.set_defaults(run=_verify)

    audit = commands.add_parser("audit", help="rebuild a run's projections from its events and diff them with the service")
    audit.add_argument("run_id", type=run_id)
    add_connection_options(audit)
    audit.set_defaults(run=_audit)

    add_runs_commands(commands)

    rebuild = commands.add_parser("rebuild-read-model",
                                  help="fold every run's listing row afresh from the log and replace the stored rows")
    rebuild.set_defaults(run=_rebuild_read_model)

    validate = commands.add_parser("validate", help="list every problem of workflow files, each with its JSON path")
    validate.add_argument("files", nargs="*", metavar="FILE", help="workflow definitions (*.json)")
    validate.add_argument("--print-schema", action="store_true", help="print the JSON Schema of workflow definitions")
    validate.set_defaults(run=partial(_validate, validate))

    hermes = commands.add_parser("hermes", help="remote Hermes Agent gateways")
    hermes_commands = hermes.add_subparsers(dest="hermes_command", required=True)
    hermes_check = hermes_commands.add_parser("check", help="probe each configured gateway (exit 1 unless all are ok)")
    hermes_check.add_argument("gateway", nargs="?", default=None, help="only this gateway id")
    hermes_check.set_defaults(run=_hermes_check)
    return parser


# Each command imports its module only when it runs, so one command does not load the others' dependencies.


def _serve(args: argparse.Namespace) -> int:
    from scripts.serve import serve

    return serve()


def _demo(args: argparse.Namespace) -> int:
    from scripts.demo import demo

    return demo(args.workflow, url=args.url, key=args.key)


def _config(args: argparse.Namespace) -> int:
    from scripts.config import show_config, show_reference

    return show_reference() if args.reference else show_config(as_json=args.json)


def _export(args: argparse.Namespace) -> int:
    from scripts.export import export_run

    return export_run(args.run_id, args.output, url=args.url, key=args.key)


def _verify(args: argparse.Namespace) -> int:
    from scripts.verify import verify_file

    return verify_file(args.file)


def _audit(args: argparse.Namespace) -> int:
    from scripts.audit import audit_run

    return audit_run(args.run_id, url=args.url, key=args.key)


def _rebuild_read_model(args: argparse.Namespace) -> int:
    from scripts.rebuild_read_model import rebuild_read_model

    return rebuild_read_model()


def _validate(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from scripts.validate import print_schema, validate_files

    if args.print_schema:
        return print_schema()
    if not args.files:
        parser.error("give at least one FILE (or --print-schema)")
    return validate_files(args.files)


def _hermes_check(args: argparse.Namespace) -> int:
    from scripts.hermes import check_gateways

    return check_gateways(args.gateway)


if __name__ == "__main__":
    sys.exit(main())
