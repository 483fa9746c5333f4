"""Recorded spans of real frameworks (tests/fixtures/frameworks/<framework>/<scenario>.*) rebuild their ground truth.

Each ``<scenario>.expected.json`` was written by the generator from what the tools actually received; the spans
(``<scenario>.traces.pb``, optional ``<scenario>.logs.pb``) are re-encoded as the Collector would (protobuf and
OTLP/JSON), split over several records, shuffled, decoded and rebuilt. Run fields that the expected file leaves
``null`` are not compared; call ``args`` are compared when content was captured and must be ABSENT when it was not.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from monitor.trajectory.model import ABSENT
from tests.support.capture import to_records
from tests.support.scenarios import UNCHECKED, ErrorType, ExpectedCall, ExpectedRun, assert_runs_match, rebuild

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks"
EXPECTED = sorted(FIXTURES.glob("*/*.expected.json"))
IDS = [f"{p.parent.name}/{p.name.removesuffix('.expected.json')}" for p in EXPECTED]


def _load(path: Path) -> tuple[dict[str, Any], ExportTraceServiceRequest, ExportLogsServiceRequest | None]:
    expected = json.loads(path.read_text())
    stem = path.name.removesuffix(".expected.json")
    traces = ExportTraceServiceRequest()
    traces.ParseFromString((path.parent / f"{stem}.traces.pb").read_bytes())
    logs = None
    logs_path = path.parent / f"{stem}.logs.pb"
    if logs_path.exists():
        logs = ExportLogsServiceRequest()
        logs.ParseFromString(logs_path.read_bytes())
    return expected, traces, logs


def _field(value: Any) -> Any:
    return UNCHECKED if value is None else value


def _call(raw: dict[str, Any], content: bool, kinds: bool = False) -> ExpectedCall:
    """``kinds``: the fixture marks kinds (``"kind": "framework"``), so an unmarked call must be a ``function``."""
    error = raw.get("error")
    if error is None:
        want_error: Any = False
    elif isinstance(error, str):
        want_error = ErrorType(error)
    elif isinstance(error, dict) and error.get("in_spans") is False:
        want_error = True  # the tool raised this type, but the spans do not record it: only that it failed
    elif isinstance(error, dict) and isinstance(error.get("type"), str):
        want_error = ErrorType(error["type"])
    else:
        want_error = bool(error)
    args = raw.get("args", UNCHECKED) if content else ABSENT
    kind = raw.get("kind", "function") if kinds else UNCHECKED
    return ExpectedCall(raw["name"], args, want_error, kind=kind)


def _run(raw: dict[str, Any], content: bool) -> ExpectedRun:
    """Without content capture the run must not pretend to know the user's text or the answer."""
    calls = raw.get("calls")
    children = raw.get("children")
    return ExpectedRun(
        agent=_field(raw.get("agent")),
        user_text=_field(raw.get("user_text")) if content else None,
        final_response=_field(raw.get("final_response")) if content else None,
        tools_offered=_field(raw.get("tools_offered")),
        calls=UNCHECKED if calls is None else [_call(c, content, any("kind" in c for c in calls)) for c in calls],
        children=UNCHECKED if children is None else [_run(c, content) for c in children],
        trace_id=_field(raw.get("trace_id")),
    )


def expected_runs(expected: dict[str, Any]) -> list[ExpectedRun]:
    content = bool(expected.get("content_captured", True))
    return [_run(r, content) for r in expected["runs"]]


def test_framework_fixtures_are_present_and_complete() -> None:
    assert EXPECTED, f"no fixtures under {FIXTURES}"
    for path in EXPECTED:
        stem = path.name.removesuffix(".expected.json")
        assert (path.parent / f"{stem}.traces.pb").exists(), f"{path} has no .traces.pb"
        expected = json.loads(path.read_text())
        assert {"framework", "scenario", "content_captured", "runs"} <= expected.keys(), path
        assert expected["runs"], f"{path}: no runs"


@pytest.mark.parametrize("encoding", ["otlp_proto", "otlp_json"])
@pytest.mark.parametrize("path", EXPECTED, ids=IDS)
def test_framework_fixture_rebuilds_expected_runs(path: Path, encoding: str) -> None:
    expected, traces, logs = _load(path)
    runs = rebuild(traces, logs, encoding=encoding, parts=3, seed=11)
    assert_runs_match(runs, expected_runs(expected))
    if not expected["content_captured"]:
        for run in runs:
            for r in run.walk():
                assert all(not c.args_captured for c in r.calls), f"{r.trace_id}: args captured though content is off"


def _canonical(runs: list[Any]) -> list[Any]:
    return sorted(runs, key=lambda r: (r.trace_id, r.run_id))


@pytest.mark.parametrize("path", EXPECTED, ids=IDS)
def test_framework_fixture_any_split_and_order_of_records_rebuilds_the_same_runs(path: Path) -> None:
    _, traces, logs = _load(path)
    baseline = _canonical(rebuild(traces, logs, encoding="otlp_proto", parts=1, seed=0))
    assert baseline, "fixture rebuilds no run"

    from monitor.ingest.decode import decode_logs, decode_traces
    from monitor.trajectory.build import build_runs

    @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(
        parts=st.integers(min_value=1, max_value=8),
        seed=st.integers(min_value=0, max_value=2**32 - 1),
        encoding=st.sampled_from(["otlp_proto", "otlp_json"]),
        data=st.data(),
    )
    def prop(parts: int, seed: int, encoding: str, data: st.DataObject) -> None:
        rng = random.Random(seed)
        records = to_records(traces, encoding, parts, rng)  # type: ignore[arg-type]
        records = data.draw(st.permutations(records), label="record order")
        spans = [s for value in records for s in decode_traces(value, encoding)]
        events = []
        if logs is not None and len(logs.resource_logs):
            log_records = to_records(logs, encoding, parts, rng)  # type: ignore[arg-type]
            events = [e for value in log_records for e in decode_logs(value, encoding)]
        assert _canonical(build_runs(spans, events)) == baseline

    prop()


# --------------------------------------------------------------------------- one model call, two model spans

# An instrumentation on top of the anthropic SDK's own spans records every model call twice, as siblings:
# OpenLLMetry's `anthropic.chat` (traceloop-sdk) or OpenInference's `messages.stream` beside the SDK's
# `anthropic.messages.create`. Exact expectations per scenario: the tool-call names of each model step, then
# every call as (name, args, error type or None, step, part); every call is executed.
TWIN_SPAN_FIXTURES = ("traceloop_sdk_anthropic", "openinference_anthropic_stream")
TWIN_SPAN_SCENARIOS: dict[str, tuple[list[list[str]], list[tuple[str, dict[str, Any], str | None, int, int]], str]] = {
    "sequential_tools": (
        [["get_weather"], ["get_time"], []],
        [("get_weather", {"city": "Paris"}, None, 0, 0), ("get_time", {"tz": "Europe/Paris"}, None, 1, 0)],
        "Paris: 18°C and sunny; it is 09:30 there.",
    ),
    "parallel_tools": (
        [["get_weather", "get_time"], []],
        [("get_weather", {"city": "Tokyo"}, None, 0, 0), ("get_time", {"tz": "Asia/Tokyo"}, None, 0, 1)],
        "Tokyo: 18°C and sunny, local time 09:30.",
    ),
    "failing_tool": (
        [["lookup_order"], []],
        [("lookup_order", {"order_id": "A-17"}, "OrderServiceError", 0, 0)],
        "Sorry, I could not look up order A-17 right now.",
    ),
    "no_tool": ([[]], [], "Bonjour !"),
}
MODEL_SPAN_NAMES = {"anthropic.chat", "messages.stream", "anthropic.messages.create"}


@pytest.mark.parametrize("encoding", ["otlp_proto", "otlp_json"])
@pytest.mark.parametrize("scenario", list(TWIN_SPAN_SCENARIOS))
@pytest.mark.parametrize("framework", TWIN_SPAN_FIXTURES)
def test_one_model_call_recorded_by_two_sibling_spans_is_one_step_and_its_calls_are_linked(
    framework: str, scenario: str, encoding: str
) -> None:
    from monitor.trajectory.view import view

    expected, traces, logs = _load(FIXTURES / framework / f"{scenario}.expected.json")
    step_calls, calls, answer = TWIN_SPAN_SCENARIOS[scenario]
    assert expected["model_calls"] == len(step_calls)

    # the recording really holds the duplicate: two sibling model spans per model call
    spans = [s for rs in traces.resource_spans for ss in rs.scope_spans for s in ss.spans]
    model_spans = [s for s in spans if s.name in MODEL_SPAN_NAMES]
    assert len(model_spans) == 2 * len(step_calls)
    assert {s.name for s in model_spans} - {"anthropic.messages.create"} == (
        {"anthropic.chat"} if framework == "traceloop_sdk_anthropic" else {"messages.stream"}
    )
    (agent_span,) = [s for s in spans if not s.parent_span_id]
    assert all(s.parent_span_id == agent_span.span_id for s in model_spans)

    (run,) = rebuild(traces, logs, encoding=encoding, parts=3, seed=5)
    assert run.agent == "travel_agent" and run.final_response == answer
    assert [[c.name for c in step.tool_calls] for step in run.steps] == step_calls
    got = [(c.name, c.args, c.error.type.rsplit(".", 1)[-1] if c.error else None, c.step, c.part) for c in run.calls]
    assert got == calls
    assert all(c.executed for c in run.calls), "a selected call was left without its execution"
    for c in run.calls:
        assert c.step is not None and c.part is not None
        assert c.call_id is not None and c.call_id == run.steps[c.step].tool_calls[c.part].id
    assert [c.name for c in view(run, calls_source="selected")] == [c[0] for c in calls]
    # each step keeps the usage of its one call, and the run's usage counts every call once
    assert all(step.usage.input_tokens is not None and step.usage.output_tokens is not None for step in run.steps)
    assert run.usage.input_tokens == sum(step.usage.input_tokens or 0 for step in run.steps)


# --------------------------------------------------------------------------- framework tools, results from log events


@pytest.mark.parametrize(
    ("fixture", "control_tool"),
    [("smolagents_oi/code_sequential", "final_answer"), ("dspy_oi/sequential", "finish")],
)
def test_a_frameworks_own_control_tool_is_kept_but_scorers_do_not_see_it(fixture: str, control_tool: str) -> None:
    from monitor.trajectory.view import view

    _, traces, logs = _load(FIXTURES / f"{fixture}.expected.json")
    (run,) = rebuild(traces, logs, parts=2, seed=3)
    assert [c.kind for c in run.calls if c.name == control_tool] == ["framework"]
    assert all(c.kind == "function" for c in run.calls if c.name != control_tool)
    assert control_tool not in [c.name for c in view(run)]
    assert control_tool in [c.name for c in view(run, framework=True)]
    assert [c.index for c in view(run)] == list(range(len(view(run))))


def test_a_tool_result_logged_only_in_the_next_model_calls_events_is_the_calls_result() -> None:
    """Microsoft Agent Framework with the 1.36 conventions: no content on spans; the arguments are in the
    `gen_ai.choice` log record, the result only in the next model call's `gen_ai.tool.message` record."""
    _, traces, logs = _load(FIXTURES / "agent_framework_legacy" / "sequential.expected.json")
    assert logs is not None
    (run,) = rebuild(traces, logs, parts=3, seed=1)
    assert [(c.name, c.args, c.result) for c in run.calls] == [
        ("get_weather", {"city": "Paris"}, "Paris: 18°C, sunny"),
        ("get_time", {"tz": "Europe/Paris"}, "09:30"),
    ]
    (spans_only,) = rebuild(traces, None, parts=3, seed=1)
    assert all(not c.args_captured for c in spans_only.calls)
