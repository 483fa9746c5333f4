"""agent-tool-monitor: rebuild agent runs from OpenTelemetry spans, score their tool calls, gate CI on datasets.

The public API, for your own tests and scripts. Every function imports what it needs when it is called, so
``import monitor`` stays cheap; the functions are thin entry points onto the code the daemon and the ``monitor``
commands run, so they give the same answers.

Build runs (:class:`~monitor.trajectory.model.Run`, nested agent runs in ``Run.children``):

* :func:`runs_from_spans` — finished OpenTelemetry SDK spans (e.g. from ``InMemorySpanExporter``);
* :func:`runs_from_otlp` — OTLP record values as they sit on Kafka (protobuf or JSON ``ExportTraceServiceRequest``);
* :func:`runs_from_files` — files of such records (what ``monitor inspect`` reads);
* :func:`run_from_dict` — a hand-written run (the ``actual`` of a native dataset case, ``monitor score`` input).

Score them:

* :func:`score` — as the daemon does: the configured checks and the per-agent rules' scorers, sampling included;
* :func:`score_against` — against an expectation, as ``monitor score`` does (native ``expect`` block, scorers).

Datasets and the gate:

* :func:`load_dataset` — golden datasets (native, ADK, Ragas, tool-eval seeds), as ``monitor eval`` reads them;
* :func:`run_gate` — ``monitor eval`` itself: exit code, the JSON report and the console output.

Test kit: :mod:`monitor.testing` (in-memory broker, manual clock, recording metrics, a fake Anthropic API, span
capture and ``assert_tools``); pytest plugin: :mod:`monitor.pytest_plugin` (the ``monitor_runs`` fixture).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from monitor import _lazy

if TYPE_CHECKING:
    from datetime import datetime

    from opentelemetry.sdk.trace import ReadableSpan

    from monitor.rules.datasets.model import Dataset
    from monitor.rules.ruleset import RuleSet
    from monitor.scoring.result import ScoreResult
    from monitor.settings import Settings
    from monitor.trajectory.model import Run, ToolCall

__all__ = [
    "Dataset",
    "GateResult",
    "RuleSet",
    "Run",
    "ScoreResult",
    "Settings",
    "ToolCall",
    "load_dataset",
    "run_from_dict",
    "run_gate",
    "runs_from_files",
    "runs_from_otlp",
    "runs_from_spans",
    "score",
    "score_against",
]

_TYPES: dict[str, tuple[str, str]] = {
    "Dataset": ("monitor.rules.datasets.model", "Dataset"),
    "RuleSet": ("monitor.rules.ruleset", "RuleSet"),
    "Run": ("monitor.trajectory.model", "Run"),
    "ScoreResult": ("monitor.scoring.result", "ScoreResult"),
    "Settings": ("monitor.settings", "Settings"),
    "ToolCall": ("monitor.trajectory.model", "ToolCall"),
}


def __getattr__(name: str) -> Any:
    return _lazy.load(__name__, globals(), _TYPES, name)


# --------------------------------------------------------------------------- building runs


def runs_from_spans(spans: Iterable[ReadableSpan]) -> list[Run]:
    """The top-level runs of finished SDK spans, by start time, exactly as the daemon rebuilds them.

    The spans go through the OTLP exporter's encoder and the daemon's decoder first (what a Collector would put
    on Kafka), then :func:`monitor.trajectory.build.build_runs`. Spans of several traces give several runs.
    """
    from monitor.evaluation.runner_common import spans_to_records
    from monitor.trajectory.build import build_runs

    return build_runs(spans_to_records(list(spans)))


def runs_from_otlp(
    values: bytes | Iterable[bytes], *, logs: bytes | Iterable[bytes] = (), encoding: str = "auto"
) -> list[Run]:
    """The top-level runs of OTLP trace records (Kafka record values), with GenAI log records joined to their spans.

    ``encoding``: ``auto`` (detected per record), ``otlp_proto`` or ``otlp_json``. Spans of one trace may be split
    over any number of records. Raises :class:`monitor.ingest.decode.DecodeError` for a record that does not
    decode and :class:`monitor.trajectory.build.RebuildRejected` for a trace nested beyond the rebuild limits.
    """
    from monitor.ingest.decode import decode_logs, decode_traces
    from monitor.trajectory.build import build_runs

    span_values = [values] if isinstance(values, bytes | bytearray) else list(values)
    log_values = [logs] if isinstance(logs, bytes | bytearray) else list(logs)
    spans = [s for value in span_values for s in decode_traces(bytes(value), encoding)]
    events = [e for value in log_values for e in decode_logs(bytes(value), encoding)]
    return build_runs(spans, events)


def runs_from_files(
    trace_files: Sequence[str | Path], log_files: Sequence[str | Path] = (), *, encoding: str = "auto"
) -> list[Run]:
    """The top-level runs of record files (``.pb`` length-delimited protobuf, ``.json``/``.jsonl`` OTLP/JSON), as
    ``monitor inspect`` reads them. Raises ``ValueError`` listing every record that did not decode or rebuild."""
    from monitor.commands.inspect import load_runs

    result = load_runs([Path(p) for p in trace_files], [Path(p) for p in log_files], encoding)
    if result.errors:
        raise ValueError("; ".join(result.errors))
    return result.runs


def run_from_dict(doc: Mapping[str, Any], *, user_input: str | None = None, source: str = "<run>") -> Run:
    """A hand-written run: the ``serialize.run_to_json`` form, as a native dataset case's ``actual`` or the ``run``
    of ``monitor score`` input (e.g. ``{"agent": "travel", "calls": [{"name": "get_weather", "args": {...}}]}``).

    Read as every command reads it (:func:`monitor.rules.datasets.native.recorded_run`): calls written without
    ``step`` or timings are the calls the model selected, one step each. ``user_input`` fills a run that records
    no input. Raises :class:`monitor.rules.datasets.model.DatasetError` (naming ``source`` and the JSON path) when
    ``doc`` is not a run.
    """
    from monitor.rules.datasets._common import Where
    from monitor.rules.datasets.native import recorded_run
    from monitor.trajectory.model import Message, TextPart

    messages = (Message("user", (TextPart(user_input),)),) if user_input is not None else None
    return recorded_run(doc, Where(source), user_input=messages)


# --------------------------------------------------------------------------- scoring


def score(
    run: Run,
    *,
    settings: Settings | Mapping[str, Any] | None = None,
    rules: RuleSet | Mapping[str, Any] | str | Path | None = None,
    now: datetime | None = None,
) -> list[ScoreResult]:
    """The results the daemon would store for ``run`` (its nested runs included, with ``score_children``).

    ``settings``: a :class:`~monitor.settings.Settings`, or sections to override (``{"scoring": {"checks": [...]}}``)
    on the settings the daemon would load (``MONITOR_CONFIG`` and ``MONITOR_*`` variables apply); default: those.
    ``rules``: a :class:`~monitor.rules.ruleset.RuleSet`, a rules mapping (``{"rules": [...], "catalogue": ...}``)
    or a rules file; default: the settings' ``rules_file``. Sampling applies (``sampling.rate`` < 1 may skip the
    run: ``[]``). Judge scorers are ``not_applicable/judges_disabled`` (no judge pool here). ``now`` stamps
    ``scored_at`` (default: the current time).
    """
    from datetime import UTC
    from datetime import datetime as _datetime

    from monitor.rules.ruleset import RuleSet
    from monitor.sampling.sampler import Sampler
    from monitor.scoring.stage import ScoringStage
    from monitor.settings import Settings, load_settings

    s = settings if isinstance(settings, Settings) else load_settings(None, **dict(settings or {}))
    ruleset: RuleSet | None
    if rules is None:
        ruleset = RuleSet.load(s.rules_file) if s.rules_file is not None else None
    elif isinstance(rules, RuleSet):
        ruleset = rules
    elif isinstance(rules, str | Path):
        ruleset = RuleSet.load(rules)
    else:
        ruleset = RuleSet.from_mapping(rules)
    moment = now

    def clock() -> _datetime:
        return moment if moment is not None else _datetime.now(UTC)

    return ScoringStage(s, ruleset, Sampler(s.sampling), clock).score(run)


def score_against(
    run: Run | Sequence[Run],
    expect: Mapping[str, Any] | None = None,
    scorers: Sequence[str | Mapping[str, Any]] | None = None,
    *,
    judges: bool = False,
    now: str | None = None,
) -> list[ScoreResult]:
    """Score ``run`` against an expectation, as ``monitor score`` does (one result per scorer).

    ``expect``: a native ``expect`` block (SCORING.md §6.5, e.g. ``{"calls": [{"name": "get_weather", "args":
    {"city": "Paris"}}], "forbidden_tools": ["delete"]}``). ``scorers``: kinds or ``{"kind", "params"?, "id"?}``
    (``monitor scorers`` lists them); default: the native format's default scorers. A list of runs is one
    conversation, one run per turn, the expectation on the first. Judges are ``not_applicable`` unless ``judges``
    and a judge is registered. Raises :class:`monitor.rules.datasets.model.DatasetError` for invalid input.
    """
    from monitor.commands.score import score_document
    from monitor.trajectory.model import Run as _Run
    from monitor.trajectory.serialize import run_to_json

    doc: dict[str, Any] = {
        "run": run_to_json(run) if isinstance(run, _Run) else [run_to_json(r) for r in run],
    }
    if expect is not None:
        doc["expect"] = dict(expect)
    if scorers is not None:
        doc["scorers"] = [{"kind": s} if isinstance(s, str) else dict(s) for s in scorers]
    return score_document(doc, "<score_against>", judges=judges, now=now)


# --------------------------------------------------------------------------- datasets and the gate


def load_dataset(path: str | Path, *, skip_unsupported: bool = False) -> list[Dataset]:
    """The datasets in a file or directory (format detected per file), as ``monitor eval`` loads them.

    Raises :class:`monitor.rules.datasets.model.DatasetError` naming the file and JSON path of the first problem.
    """
    from monitor.rules.datasets.loader import load_paths

    return load_paths([Path(path)], skip_unsupported=skip_unsupported)


@dataclass(frozen=True)
class GateResult:
    """What :func:`run_gate` returns: ``monitor eval``'s exit code, report and output."""

    exit_code: int
    """0 passed; 1 suite failed; 2 usage, configuration or dataset error; 3 a gated criterion could not run."""
    report: dict[str, Any] | None
    """The JSON report (``--report``); None when nothing was scored (exit 2)."""
    output: str = ""
    """The console summary."""
    errors: str = ""
    """What ``monitor eval`` printed to stderr."""

    @property
    def passed(self) -> bool:
        return self.exit_code == 0


def run_gate(
    paths: str | Path | Sequence[str | Path],
    *,
    config: str | Path | None = None,
    traces: Sequence[str | Path] = (),
    runs: int | None = None,
    judges: bool = True,
    baseline: str | Path | None = None,
    tolerance: float = 0.0,
    skip_unsupported: bool = False,
    agent: str | None = None,
    runner: str | None = None,
    case_timeout: float = 300.0,
) -> GateResult:
    """Run ``monitor eval`` on the datasets under ``paths`` (same options, same exit codes; see docs/eval.md).

    ``agent`` (``module:callable``) runs your agent in process on every case, ``runner`` a command per case;
    ``traces`` are recorded runs to score instead. Nothing is written outside a temporary directory.
    """
    import io
    import json
    import tempfile

    from monitor.commands.eval import EvalArgs, run_eval

    given = [paths] if isinstance(paths, str | Path) else list(paths)
    with tempfile.TemporaryDirectory(prefix="monitor-gate-") as tmp:
        report_path = Path(tmp) / "report.json"
        args = EvalArgs(
            paths=[Path(p) for p in given],
            config=Path(config) if config is not None else None,
            traces=[Path(p) for p in traces],
            runs=runs,
            judges=judges,
            report=report_path,
            baseline=Path(baseline) if baseline is not None else None,
            tolerance=tolerance,
            skip_unsupported=skip_unsupported,
            agent=agent,
            runner=runner,
            case_timeout=case_timeout,
        )
        out, err = io.StringIO(), io.StringIO()
        code = run_eval(args, out, err)
        report = json.loads(report_path.read_text(encoding="utf-8")) if report_path.exists() else None
    return GateResult(code, report, out.getvalue(), err.getvalue())
