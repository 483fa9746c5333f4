"""Command line: parse arguments, load settings, hand over. No logic lives here.

Exit codes: 0 success; 1 a command ran and found a failure; 2 usage or configuration error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from monitor.settings import SettingsError, load_settings


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="monitor", description="Agent tool-use monitor")
    sub = parser.add_subparsers(dest="command", required=True)

    inspect = sub.add_parser("inspect", help="decode record files and print the rebuilt agent runs")
    inspect.add_argument("files", nargs="+", type=Path, help="record files (OTLP protobuf or JSON)")
    inspect.add_argument("--logs", nargs="*", type=Path, default=[], help="OTLP logs record files (GenAI events)")
    inspect.add_argument("--format", choices=("table", "json"), default="table", help="table, or JSON lines")
    inspect.add_argument("--encoding", choices=("auto", "otlp_proto", "otlp_json"), default="auto")

    config = sub.add_parser("config", help="validate a configuration and print the effective settings")
    config.add_argument("--config", type=Path, default=None, help="YAML settings file")
    config.add_argument("--defaults", action="store_true", help="print the defaults")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "inspect":
        from monitor.commands.inspect import load_runs, render

        result = load_runs(args.files, args.logs, args.encoding)
        render(result, args.format, sys.stdout)
        return 0
    if args.command == "config":
        import yaml

        try:
            settings = load_settings(None if args.defaults else args.config)
        except SettingsError as exc:
            print(exc, file=sys.stderr)
            return 2
        print(yaml.safe_dump(settings.model_dump(mode="json"), sort_keys=False), end="")
        return 0
    return 2  # pragma: no cover - argparse enforces the choices


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
