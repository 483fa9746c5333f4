"""What every runner shares: the failure type, the protocol, the content-capture switches and the
spans → runs path (SCORING.md §6.6).

A runner turns one golden :class:`~monitor.rules.datasets.model.Case` into one
:class:`~monitor.trajectory.model.Run` per turn, in order. Every runner rebuilds its runs with the
daemon's own trajectory code: finished OTel spans are encoded with the OTLP exporter's
``encode_spans`` (exactly what the Collector receives), decoded with :mod:`monitor.ingest.decode`
and built with :func:`monitor.trajectory.build.build_runs`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, Protocol

from monitor.ingest.decode import DecodeError, decode_traces
from monitor.trajectory.build import build_runs
from monitor.trajectory.normalize import Role, detect_role
from monitor.trajectory.semconv import Monitor
from monitor.trajectory.spans import LogEvent, SpanRecord

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

    from monitor.rules.datasets.model import Case, Turn
    from monitor.trajectory.model import Run

RUNNER_FAILURE_REASONS: Final = (
    "config",  # the runner cannot be set up (bad spec, import error, no API key, …)
    "exception",  # the agent under test raised
    "timeout",  # the case did not finish within the runner's timeout
    "exit_status",  # the runner command exited with a non-zero status
    "missing_run",  # fewer agent runs than turns were captured
    "ambiguous_run",  # a turn produced several candidate runs and none is the obvious one
    "unexpected_runs",  # the runner command emitted more agent runs than the case has turns
    "invalid_spans",  # the runner command sent OTLP data that does not decode
    "api_error",  # the model API failed after the SDK's retries
)
"""Every :attr:`RunnerFailed.reason` a runner of this package raises."""

CONTENT_CAPTURE_ENV: Final[Mapping[str, str]] = {
    # OTel GenAI instrumentations (contrib, util-genai, ADK 2.x, strands): the v1.37+ form, content on spans
    "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
    # OpenLLMetry / Traceloop
    "TRACELOOP_TRACE_CONTENT": "true",
    # the anthropic SDK's own spans (clients given no ``open_telemetry`` option)
    "ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE": "content",
    # Google ADK 1.x
    "ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS": "true",
    # OpenInference (content is on by default; these keep it on)
    "OPENINFERENCE_HIDE_INPUTS": "false",
    "OPENINFERENCE_HIDE_OUTPUTS": "false",
    "OPENINFERENCE_HIDE_INPUT_MESSAGES": "false",
    "OPENINFERENCE_HIDE_OUTPUT_MESSAGES": "false",
}
"""Content-capture switches of the common instrumentations. Runners set each one only when the
user's environment does not already set it (an explicit user choice always wins)."""


class RunnerFailed(Exception):
    """A case could not be run. ``reason`` is a short code from :data:`RUNNER_FAILURE_REASONS`,
    ``detail`` a human-readable explanation; the gate reports the case's results as
    ``error/runner_failed`` (SCORING.md §6.6)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class Runner(Protocol):
    """Produces the actual trajectory of a case: one :class:`Run` per turn, in turn order.

    ``run_no`` (0-based) distinguishes repeated runs of one case (``--runs N``). Implementations
    raise :class:`RunnerFailed` and nothing else for a case that cannot be run.
    """

    name: str

    def run(self, case: Case, run_no: int) -> list[Run]: ...


# --------------------------------------------------------------------------- environment


def content_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The switches of :data:`CONTENT_CAPTURE_ENV` that ``environ`` (default ``os.environ``) lacks."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in CONTENT_CAPTURE_ENV.items() if k not in env}


@contextmanager
def content_capture_env() -> Iterator[dict[str, str]]:
    """Set the missing content-capture switches in ``os.environ`` for the block, then remove them.

    Yields what was set. Variables the block itself changes are left as they are.
    """
    added = content_env()
    os.environ.update(added)
    try:
        yield added
    finally:
        for key, value in added.items():
            if os.environ.get(key) == value:
                del os.environ[key]


# --------------------------------------------------------------------------- case input


def turn_messages(turn: Turn) -> list[dict[str, str]]:
    """The turn's input as ``[{"role", "content"}]`` (text only; messages without text are dropped)."""
    return [{"role": m.role, "content": m.text} for m in turn.input if m.text]


def case_payload(case: Case, run_no: int) -> dict[str, Any]:
    """The JSON document handed to a runner command as ``MONITOR_EVAL_CASE`` (see docs/runners.md)."""
    return {
        "case_id": case.id,
        "run": run_no,
        "turns": [
            {
                "turn": i,
                "input": turn.text,
                "messages": turn_messages(turn),
                "session_input": _jsonable(turn.session_input),
            }
            for i, turn in enumerate(case.turns)
        ],
        "tools": None
        if case.tools is None
        else [{"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in case.tools],
        "config": _jsonable(dict(case.config)),
    }


def _jsonable(value: Any) -> Any:
    """``value`` round-tripped through JSON (unknown objects as their ``str``)."""
    if value is None:
        return None
    return json.loads(json.dumps(value, default=str))


# --------------------------------------------------------------------------- spans → runs


def spans_to_records(spans: Sequence[ReadableSpan]) -> list[SpanRecord]:
    """Finished SDK spans as the daemon sees them: OTLP-encoded with the exporter's ``encode_spans``
    (protobuf, as the Collector receives them) and decoded with :func:`decode_traces`."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    if not spans:
        return []
    payload = encode_spans(spans).SerializeToString()
    try:
        return decode_traces(payload, "otlp_proto")
    except DecodeError as exc:
        raise RunnerFailed("invalid_spans", str(exc)) from exc


def rebuild(records: Sequence[SpanRecord], logs: Sequence[LogEvent] = ()) -> list[Run]:
    """Top-level runs of ``records`` (nested runs in ``children``), by start time."""
    return build_runs(records, logs)


def is_agent_rooted(run: Run, records: Mapping[str, SpanRecord]) -> bool:
    """Whether the run's root span is an agent (or workflow) span, rather than a bare model/tool
    subtree or a plain span that encloses model and tool spans."""
    root = records.get(run.run_id)
    return root is not None and detect_role(root) in (Role.AGENT, Role.WORKFLOW)


def prefer_agent_runs(runs: Sequence[Run], records: Sequence[SpanRecord]) -> list[Run]:
    """The agent-rooted runs of ``runs`` when there is at least one, else ``runs`` unchanged.

    A guard-rail model call made next to an agent becomes a run of its own when it sits outside
    the agent span; the agent run is the turn's run.
    """
    by_id = {r.span_id: r for r in records}
    agents = [r for r in runs if is_agent_rooted(r, by_id)]
    return agents if agents else list(runs)


def with_eval_attributes(run: Run, case_id: str, turn: int, run_no: int) -> Run:
    """``run`` carrying ``monitor.eval.case_id`` / ``turn`` / ``run`` in ``Run.attributes``
    (values already there are replaced), as runs read with ``--traces`` carry them."""
    ours = {Monitor.CASE_ID: case_id, Monitor.TURN: str(turn), Monitor.RUN: str(run_no)}
    kept = tuple((k, v) for k, v in run.attributes if k not in ours)
    return dataclasses.replace(run, attributes=kept + tuple(ours.items()))
