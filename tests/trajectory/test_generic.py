"""Unknown frameworks degrade, not vanish: spans of a framework no convention knows still give a run when they
carry generic evidence (a span naming a tool beside an input or output key, a model span with a list of tool
calls), flagged ``convention: generic``; ``explain_spans`` says span by span why; the rebuild counts such spans per
instrumentation scope.

Spans are written by the real OTel SDK under an instrumentation scope of a made-up framework, then encoded as the
Collector does (protobuf and OTLP/JSON, split, shuffled) and decoded.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator

import pytest
from opentelemetry.trace import Status, StatusCode

from monitor.ingest.decode import decode_traces
from monitor.trajectory.build import build_runs
from monitor.trajectory.explain import explain_spans
from monitor.trajectory.model import ABSENT
from monitor.trajectory.spans import SpanRecord
from tests.support.capture import SpanCapture, capture, to_records

SCOPE = "acme.agents"


@pytest.fixture()
def cap() -> Iterator[SpanCapture]:
    with capture({"service.name": "acme-svc"}) as c:
        yield c


def _acme_run(cap: SpanCapture, *, fail_second: bool = False) -> None:
    """An "acme" agent: two model calls, two tools in the first, keys no convention defines."""
    tracer = cap.tracer(SCOPE, "0.3.1")
    calls = [
        {"toolName": "get_weather", "toolCallId": "c1", "args": json.dumps({"city": "Paris"})},
        {"toolName": "get_time", "toolCallId": "c2", "args": json.dumps({"tz": "Europe/Paris"})},
    ]
    with tracer.start_as_current_span("acme.run", attributes={"acme.run.input": "Weather and time in Paris?"}):
        with tracer.start_as_current_span(
            "acme.llm", attributes={"acme.model.id": "acme-1", "acme.response.tool_calls": json.dumps(calls)}
        ):
            pass
        with tracer.start_as_current_span(
            "acme.tool",
            attributes={
                "acme.tool.name": "get_weather",
                "acme.tool.call_id": "c1",
                "acme.tool.input": calls[0]["args"],
            },
        ) as span:
            span.set_attribute("acme.tool.output", json.dumps({"temp": 18}))
        with tracer.start_as_current_span(
            "acme.tool",
            attributes={"acme.tool.name": "get_time", "acme.tool.call_id": "c2", "acme.tool.input": calls[1]["args"]},
        ) as span:
            if fail_second:
                span.set_status(Status(StatusCode.ERROR, "TimeServiceDown"))
            else:
                span.set_attribute("acme.tool.output", "09:30")
        with tracer.start_as_current_span(
            "acme.llm", attributes={"acme.model.id": "acme-1", "acme.response.text": "18°C, 09:30."}
        ):
            pass


def _spans(cap: SpanCapture, encoding: str = "otlp_proto", seed: int = 3) -> list[SpanRecord]:
    records = to_records(cap.request(), encoding, 3, random.Random(seed))  # type: ignore[arg-type]
    return [s for value in records for s in decode_traces(value, encoding)]


@pytest.mark.parametrize("encoding", ["otlp_proto", "otlp_json"])
def test_a_framework_without_a_convention_still_yields_a_run_flagged_generic(cap: SpanCapture, encoding: str) -> None:
    _acme_run(cap, fail_second=True)
    (run,) = build_runs(_spans(cap, encoding))
    assert run.conventions == ("generic",)
    assert run.model == "acme-1" and len(run.steps) == 2
    assert [(c.name, c.args, c.call_id, c.executed, c.step, c.part) for c in run.calls] == [
        ("get_weather", {"city": "Paris"}, "c1", True, 0, 0),
        ("get_time", {"tz": "Europe/Paris"}, "c2", True, 0, 1),
    ]
    assert run.calls[0].result == {"temp": 18} and run.calls[0].error is None
    assert run.calls[1].error is not None and run.calls[1].result is ABSENT
    assert run.final_response == "18°C, 09:30."


def test_generic_evidence_is_never_read_from_a_span_of_a_known_convention(cap: SpanCapture) -> None:
    """An OpenInference CHAIN span that happens to carry `x.tool.name` + `x.tool.input` stays a structural span."""
    tracer = cap.tracer("openinference.instrumentation.acme")
    with (
        tracer.start_as_current_span("request"),
        tracer.start_as_current_span("chain", attributes={"openinference.span.kind": "CHAIN"}) as chain,
    ):
        chain.set_attribute("app.tool.name", "get_weather")
        chain.set_attribute("app.tool.input", "{}")
    assert build_runs(_spans(cap)) == []


def test_unrecognized_spans_are_counted_per_scope_only_where_no_known_convention_gave_a_run(
    cap: SpanCapture,
) -> None:
    _acme_run(cap)  # trace 1: a generic run
    http = cap.tracer("opentelemetry.instrumentation.fastapi")
    with http.start_as_current_span("GET /health", attributes={"http.route": "/health"}):  # trace 2: no run at all
        pass
    with http.start_as_current_span("POST /chat", attributes={"http.route": "/chat"}):  # trace 3: a known run
        genai = cap.tracer("opentelemetry.instrumentation.genai")
        agent = {"gen_ai.operation.name": "invoke_agent"}
        tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather"}
        with (
            genai.start_as_current_span("invoke_agent helper", attributes=agent),
            genai.start_as_current_span("execute_tool get_weather", attributes=tool),
        ):
            pass
    counted: Counter[str] = Counter()
    runs = build_runs(_spans(cap), unrecognized=counted)
    assert sorted(r.conventions for r in runs) == [("gen_ai",), ("generic",)]
    assert counted == Counter({SCOPE: 5, "opentelemetry.instrumentation.fastapi": 1})


def test_explain_names_the_generic_spans_and_the_spans_it_could_not_read(cap: SpanCapture) -> None:
    _acme_run(cap)
    other = cap.tracer("com.example.rag", "2.0")
    with other.start_as_current_span("retrieve", attributes={"rag.query": "secret customer text", "rag.top_k": 3}):
        pass
    spans = _spans(cap)
    runs = build_runs(spans)
    notes = {(n.name, n.verdict) for n in explain_spans(spans, runs=runs)}
    assert notes == {
        ("acme.run", "structure"),
        ("acme.llm", "generic"),
        ("acme.tool", "generic"),
        ("retrieve", "not_read"),
    }
    (retrieve,) = [n for n in explain_spans(spans, runs=runs) if n.name == "retrieve"]
    assert retrieve.scope == "com.example.rag" and retrieve.scope_version == "2.0"
    assert retrieve.keys == ("rag.query", "rag.top_k")
    assert "no known convention" in retrieve.reason and "rag.query" in retrieve.reason
    assert "secret" not in retrieve.reason  # keys, never values


def test_explain_reads_known_frameworks_as_read_or_structure() -> None:
    """Every span of the recorded frameworks is read by its convention (or is structure only, or a tool's own
    work): none is left unexplained as from an unknown framework."""
    from pathlib import Path

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks"
    seen: Counter[str] = Counter()
    for path in sorted(fixtures.glob("*/*.traces.pb")):
        spans = decode_traces(path.read_bytes())
        for note in explain_spans(spans, runs=build_runs(spans)):
            seen[note.verdict] += 1
            assert note.verdict != "generic", (path, note)
            if note.verdict == "not_read":
                assert "the tool's own work" in note.reason, (path, note)
    assert seen["read"] > 400 and seen["structure"] > 0


def _renamed(span: SpanRecord, old: str, new: str) -> SpanRecord:
    """The span as an unknown framework would write it: its scope, span name and keys under another prefix."""
    import dataclasses

    def rename(text: str) -> str:
        return new + text[len(old) :] if text.startswith(old) else text

    return dataclasses.replace(
        span,
        name=rename(span.name),
        scope_name=rename(span.scope_name),
        attributes={rename(k): v for k, v in span.attributes.items()},
    )


@pytest.mark.parametrize(
    ("fixture", "prefix"), [("haystack/sequential", "haystack"), ("vercel_ai6/sequential_chat", "ai")]
)
def test_a_real_frameworks_trace_under_an_unknown_name_still_yields_its_calls_flagged_generic(
    fixture: str, prefix: str
) -> None:
    """The recorded spans of a real framework, renamed so that no convention knows them: the run is still there,
    with the tools the ground truth recorded, in order, with their arguments."""
    from pathlib import Path

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks"
    expected = json.loads((fixtures / f"{fixture}.expected.json").read_text())
    spans = [_renamed(s, prefix, "acme") for s in decode_traces((fixtures / f"{fixture}.traces.pb").read_bytes())]
    counted: Counter[str] = Counter()
    (run,) = build_runs(spans, unrecognized=counted)
    assert "generic" in run.conventions
    assert not {"haystack", "vercel_ai"} & set(run.conventions)
    (want,) = expected["runs"]
    assert [(c.name, c.args) for c in run.calls] == [(c["name"], c["args"]) for c in want["calls"]]
    if run.conventions == ("generic",):  # Vercel's model spans also carry a few gen_ai.* keys: then nothing counts
        assert counted["acme"] >= len(want["calls"])
    else:
        assert not counted
