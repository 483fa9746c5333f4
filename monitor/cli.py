"""Command line: parse arguments, load settings, hand over. No logic lives here.

Exit codes: 0 success; 1 a command ran and found a failure; 2 usage or configuration error;
``monitor eval`` adds 3 (no quality failure, but some case errored or no case produced a verdict);
``monitor judge calibrate`` uses 1 for a judge whose agreement (Cohen's kappa) is below the floor and 3 for a
judge that could not run (no API key, the API unavailable, the judge budget spent).
``monitor show`` uses 1 for a trace not in the store or whose runs were not kept; ``monitor runs`` and ``monitor
show`` use 3 when the store cannot be reached (:mod:`monitor.commands.runs`).

``monitor run`` and ``monitor config`` check a configuration the same way (:mod:`monitor.preflight`),
and ``run`` does it before it opens the store or binds the port:

* 2 — the configuration is invalid: every problem at once, one ``<name> = <value>: <problem>. Fix:
  <fix>`` line each (an environment variable is named when the value came from one);
* 4 — the configuration is valid but no Kafka bootstrap server answered within
  ``kafka.startup_timeout_s``: one line ``cannot reach the Kafka brokers at HOST:PORT within Ns: …``;
* ``run`` only: 0 after a graceful stop, 3 when the daemon stopped itself on a fatal condition
  (dead-letter rate exceeded, store unreachable at startup), 128+N when a second signal N forced it out.

``monitor config`` prints the effective settings (secrets masked) on stdout and ``configuration
valid: …`` on stderr only when every check passed; ``--no-broker-check`` skips the broker check.
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
    inspect.add_argument(
        "--explain",
        action="store_true",
        help="also list the spans the rebuild did not read (or read from generic evidence only) and why, with "
        "their instrumentation scope and attribute keys (never values): what to paste when reporting a framework",
    )

    ev = sub.add_parser(
        "eval",
        help="score golden datasets and gate CI (exit 0 pass, 1 fail, 2 usage/dataset error, 3 errored)",
    )
    ev.add_argument("paths", nargs="+", type=Path, help="dataset files or directories (searched recursively)")
    ev.add_argument("--config", type=Path, default=None, help="gate configuration (YAML/JSON: gate, scorers)")
    ev.add_argument("--traces", nargs="+", type=Path, default=[], help="OTLP record files with recorded runs")
    ev.add_argument("--runs", type=int, default=None, help="repetitions per case for runners (ADK default 2)")
    judges = ev.add_mutually_exclusive_group()
    judges.add_argument("--judges", dest="judges", action="store_true", default=True, help="run judge scorers")
    judges.add_argument("--no-judges", dest="judges", action="store_false", help="judges → not_applicable")
    ev.add_argument("--report", type=Path, default=None, help="write the JSON report here")
    ev.add_argument("--junit", type=Path, default=None, help="write JUnit XML here")
    ev.add_argument("--baseline", type=Path, default=None, help="an earlier --report to compare scorer means to")
    ev.add_argument("--tolerance", type=float, default=0.0, help="allowed drop of a scorer mean vs the baseline")
    ev.add_argument("--skip-unsupported", action="store_true", help="skip unsupported ADK metrics and cases")
    ev.add_argument("--agent", default=None, help="run cases with a Python callable (module:callable)")
    ev.add_argument("--executor", choices=("anthropic-select", "anthropic-loop"), default=None)
    ev.add_argument("--model", default=None, help="Anthropic model for --executor")
    ev.add_argument("--runner", default=None, help="run cases with a command exporting OTLP (SCORING §6.6)")
    ev.add_argument("--case-timeout", type=float, default=300.0, help="seconds per case for runners")
    ev.add_argument(
        "--judge-batch",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="judges through the Message Batches API, half price, resumable (default: the judge.batch setting)",
    )
    ev.add_argument(
        "--batch-state",
        type=Path,
        default=None,
        help="SQLite file keeping the batches in flight (default .monitor-eval-batches.sqlite)",
    )
    ev.add_argument("--batch-timeout", type=float, default=None, help="seconds to wait for the batches (25 h)")

    score = sub.add_parser("score", help="score one run (JSON on stdin or a file) and print the results as JSON")
    score.add_argument("file", nargs="?", type=Path, default=None, help="input JSON (default: stdin)")
    score.add_argument("--no-judges", dest="judges", action="store_false", default=True)

    judge = sub.add_parser("judge", help="LLM judges: calibrate them against labelled runs")
    judge_sub = judge.add_subparsers(dest="judge_command", required=True)
    calibrate = judge_sub.add_parser(
        "calibrate",
        help="agreement of judges with human labels or a code scorer, and their corrected failure rate "
        "(exit 0 at or above the floor, 1 below, 2 usage/dataset error, 3 a judge could not run)",
    )
    calibrate.add_argument(
        "--dataset", type=Path, default=None, help="labelled runs (default: the shipped tool-selection cases)"
    )
    calibrate.add_argument(
        "--judge",
        dest="judges",
        action="append",
        default=None,
        metavar="KIND",
        help="a judge kind or a judge scorer id of the dataset (repeatable; default judge_tool_selection)",
    )
    calibrate.add_argument(
        "--judge-params", default=None, metavar="JSON", help="parameters of the judges, e.g. '{\"threshold\": 1.0}'"
    )
    calibrate.add_argument(
        "--against-code",
        default=None,
        metavar="SCORER",
        help="compare with this code scorer's pass/fail (a scorer id of the dataset or a kind) instead of human labels",
    )
    calibrate.add_argument(
        "--observed",
        default=None,
        metavar="FAILED/TOTAL",
        help="the judge's failures on other runs (e.g. production) to correct (default: the calibration runs)",
    )
    calibrate.add_argument(
        "--floor", type=float, default=None, metavar="KAPPA", help="kappa floor (default judge.calibration_floor)"
    )
    calibrate.add_argument("--confidence", type=float, default=0.95, help="confidence level of the intervals")
    calibrate.add_argument("--report", type=Path, default=None, help="write the JSON report here")
    calibrate.add_argument(
        "--textfile", type=Path, default=None, help="write the gauges here (Prometheus text format, node exporter)"
    )
    calibrate.add_argument("--config", type=Path, default=None, help="YAML settings file (else $MONITOR_CONFIG / env)")

    scorers = sub.add_parser("scorers", help="list the scorer catalogue")
    scorers.add_argument("--format", choices=("table", "json"), default="table")

    demo = sub.add_parser("demo", help="embedded broker + simulated agents + the daemon, live (needs the demo extra)")
    demo.add_argument("--duration", type=float, default=45.0, help="seconds of simulated traffic")
    demo.add_argument("--rate", type=float, default=20.0, help="simulated agent runs per second")
    demo.add_argument("--seed", type=int, default=1, help="traffic seed (the same runs every time)")
    demo.add_argument("--port", type=int, default=0, help="port of the daemon's HTTP server (0 = any free port)")

    runs_cmd = sub.add_parser(
        "runs",
        help="list the scored runs in the store, newest first (exit 0; 2 bad argument, settings or schema; "
        "3 store unreachable)",
    )
    runs_cmd.add_argument("--agent", dest="agents", action="append", default=None, metavar="AGENT", help="repeatable")
    runs_cmd.add_argument(
        "--tool", dest="tools", action="append", default=None, metavar="TOOL", help="a tool the run called (repeatable)"
    )
    runs_cmd.add_argument(
        "--kind", dest="kinds", action="append", default=None, metavar="KIND", help="an issue kind (repeatable)"
    )
    runs_cmd.add_argument(
        "--failed-scorer",
        dest="failed_scorers",
        action="append",
        default=None,
        metavar="SCORER",
        help="a scorer id that scored the run and did not pass (repeatable)",
    )
    runs_cmd.add_argument("--since", default=None, help="runs started at or after: ISO date/time (UTC) or 24h, 7d")
    runs_cmd.add_argument("--until", default=None, help="runs started before: ISO date/time (UTC) or 24h, 7d")
    runs_cmd.add_argument("--limit", type=int, default=50, help="runs listed (default 50)")
    runs_cmd.add_argument("--offset", type=int, default=0, help="skip this many runs (the next page)")
    runs_cmd.add_argument("--format", choices=("table", "json"), default="table", help="table, or JSON lines")
    runs_cmd.add_argument("--config", type=Path, default=None, help="YAML settings file (else $MONITOR_CONFIG / env)")

    show = sub.add_parser(
        "show",
        help="one stored trace: each run as inspect prints it, its scores and issues, the tracing UI link "
        "(exit 1 not in the store or not kept, 2 bad argument, settings or schema, 3 store unreachable)",
    )
    show.add_argument("trace_id", metavar="TRACE_ID", help="the full trace id, as `monitor runs` prints it")
    show.add_argument("--format", choices=("table", "json"), default="table", help="table, or JSON lines")
    show.add_argument("--config", type=Path, default=None, help="YAML settings file (else $MONITOR_CONFIG / env)")

    report = sub.add_parser(
        "report",
        help="the failure-analysis report of a week from the store: HTML, Markdown, JSON; optionally posted to a "
        "webhook (exit 0 written, 2 usage/configuration error, 3 store unreadable or webhook failed)",
    )
    report.add_argument("--week", default=None, help="ISO week, e.g. 2026-W47 (default: the last full week, UTC)")
    report.add_argument("--since", default=None, help="start: ISO date or date-time (UTC); instead of --week")
    report.add_argument("--until", default=None, help="end (exclusive): ISO date or date-time (UTC); default now")
    report.add_argument(
        "--format", dest="formats", action="append", default=None, help="html, md, json; comma-separated or repeated"
    )
    report.add_argument("--out", type=Path, default=Path("."), help="directory the report files go to")
    report.add_argument(
        "--webhook", action="store_true", help="post a summary to the URL in $MONITOR_REPORT_WEBHOOK_URL (Slack format)"
    )
    report.add_argument("--config", type=Path, default=None, help="YAML settings file (else $MONITOR_CONFIG / env)")

    run = sub.add_parser("run", help="run the daemon: consume spans, score runs, serve metrics (SIGTERM drains)")
    run.add_argument("--config", type=Path, default=None, help="YAML settings file (else $MONITOR_CONFIG / env)")

    config = sub.add_parser(
        "config",
        help="check a configuration as `monitor run` would and print the effective settings, secrets masked "
        "(exit 0 valid, 2 invalid, 4 brokers unreachable)",
    )
    config.add_argument("--config", type=Path, default=None, help="YAML settings file (else $MONITOR_CONFIG / env)")
    config.add_argument("--defaults", action="store_true", help="print the defaults (no checks)")
    config.add_argument(
        "--no-broker-check", dest="broker_check", action="store_false", help="do not try to reach the Kafka brokers"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "inspect":
        from monitor.commands.inspect import load_runs, render

        result = load_runs(args.files, args.logs, args.encoding, explain=args.explain)
        render(result, args.format, sys.stdout)
        return 0
    if args.command == "eval":
        from monitor.commands.eval import EvalArgs, run_eval

        return run_eval(
            EvalArgs(
                paths=args.paths,
                config=args.config,
                traces=args.traces,
                runs=args.runs,
                judges=args.judges,
                report=args.report,
                junit=args.junit,
                baseline=args.baseline,
                tolerance=args.tolerance,
                skip_unsupported=args.skip_unsupported,
                agent=args.agent,
                executor=args.executor,
                model=args.model,
                runner=args.runner,
                case_timeout=args.case_timeout,
                judge_batch=args.judge_batch,
                batch_state=args.batch_state,
                batch_timeout=args.batch_timeout,
            )
        )
    if args.command == "score":
        from monitor.commands.score import run_score

        return run_score(args.file, judges=args.judges)
    if args.command == "judge":
        from monitor.commands.judge import DEFAULT_JUDGE, CalibrateArgs, run_calibrate

        return run_calibrate(
            CalibrateArgs(
                dataset=args.dataset,
                judges=args.judges or (DEFAULT_JUDGE,),
                judge_params=args.judge_params,
                against_code=args.against_code,
                observed=args.observed,
                floor=args.floor,
                confidence=args.confidence,
                report=args.report,
                textfile=args.textfile,
                config=args.config,
            )
        )
    if args.command == "scorers":
        from monitor.commands.scorers import run_scorers

        return run_scorers(args.format)
    if args.command == "demo":
        from monitor.demo.run import run_demo

        return run_demo(args.duration, args.rate, args.seed, args.port)
    if args.command == "runs":
        from monitor.commands.runs import RunsArgs, run_runs

        return run_runs(
            RunsArgs(
                agents=args.agents,
                tools=args.tools,
                kinds=args.kinds,
                failed_scorers=args.failed_scorers,
                since=args.since,
                until=args.until,
                limit=args.limit,
                offset=args.offset,
                format=args.format,
                config=args.config,
            )
        )
    if args.command == "show":
        from monitor.commands.runs import run_show

        return run_show(args.trace_id, fmt=args.format, config=args.config)
    if args.command == "report":
        from monitor.commands.report import ReportArgs, run_report

        return run_report(
            ReportArgs(
                week=args.week,
                since=args.since,
                until=args.until,
                formats=args.formats or ["html"],
                out=args.out,
                webhook=args.webhook,
                config=args.config,
            )
        )
    if args.command == "run":
        try:
            settings = load_settings(args.config)
        except SettingsError as exc:
            from monitor.preflight import with_configuration_checks

            print(with_configuration_checks(exc), file=sys.stderr)
            return 2
        from monitor.app import App
        from monitor.preflight import configure_logging

        configure_logging(settings, sys.stderr)
        app = App(settings, freeze_gc=True)
        app.install_signal_handlers()
        return app.run()
    if args.command == "config":
        import yaml

        from monitor.preflight import EXIT_OK, preflight, with_configuration_checks

        try:
            settings = load_settings(None if args.defaults else args.config)
        except SettingsError as exc:
            print(exc if args.defaults else with_configuration_checks(exc), file=sys.stderr)
            return 2
        if not args.defaults:
            report = preflight(settings, brokers=args.broker_check)
            if report.exit_code != EXIT_OK:
                print(report.render(), file=sys.stderr)
                return report.exit_code
        print(yaml.safe_dump(settings.masked_dump(), sort_keys=False), end="")
        if not args.defaults:
            print(report.render(), file=sys.stderr)
        return 0
    return 2  # pragma: no cover - argparse enforces the choices


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
