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


def _call(raw: dict[str, Any], content: bool) -> ExpectedCall:
    error = raw.get("error")
    if error is None:
        want_error: Any = False
    elif isinstance(error, str):
        want_error = ErrorType(error)
    elif isinstance(error, dict) and isinstance(error.get("type"), str):
        want_error = ErrorType(error["type"])
    else:
        want_error = bool(error)
    args = raw.get("args", UNCHECKED) if content else ABSENT
    return ExpectedCall(raw["name"], args, want_error)


def _run(raw: dict[str, Any], content: bool) -> ExpectedRun:
    """Without content capture the run must not pretend to know the user's text or the answer."""
    calls = raw.get("calls")
    children = raw.get("children")
    return ExpectedRun(
        agent=_field(raw.get("agent")),
        user_text=_field(raw.get("user_text")) if content else None,
        final_response=_field(raw.get("final_response")) if content else None,
        tools_offered=_field(raw.get("tools_offered")),
        calls=UNCHECKED if calls is None else [_call(c, content) for c in calls],
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
