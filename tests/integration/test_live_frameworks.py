"""Live runs of real frameworks → real OTel SDK → Collector encoding → our decoder and builder.

Every scenario records, in its tool functions, the arguments they actually received; the rebuilt runs must equal
that ground truth after the spans were encoded (protobuf and OTLP/JSON), split over three records and shuffled.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import pytest

from tests.support import scenarios as S
from tests.support.scenarios import Scenario

ENCODINGS = ["otlp_proto", "otlp_json"]


@cache
def scenario(factory: Callable[..., Scenario], **kwargs: object) -> Scenario:
    """Each live run happens once per session; the encodings reuse its spans."""
    return factory(**kwargs)


def check(sc: Scenario, encoding: str, seed: int = 7) -> list:
    runs = S.rebuild(sc.request, sc.logs, encoding=encoding, parts=3, seed=seed)
    S.assert_runs_match(runs, sc.runs)
    return runs


# --------------------------------------------------------------------------- pydantic-ai


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_pydantic_ai_parallel_tool_calls_keep_start_order_and_model_retry_is_an_error(encoding: str) -> None:
    sc = scenario(S.pydantic_parallel_retry, version=5)
    runs = check(sc, encoding)
    calls = runs[0].calls
    assert [c.step for c in calls] == [0, 0, 1]
    assert [c.part for c in calls] == [0, 1, 0]
    assert all(c.executed for c in calls)
    assert calls[0].start_ns <= calls[1].start_ns <= calls[2].start_ns


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_pydantic_ai_legacy_instrumentation_version_2_running_tool_spans(encoding: str) -> None:
    sc = scenario(S.pydantic_parallel_retry, version=2)
    assert "running tool" in S.span_names(sc.request) and "agent run" in S.span_names(sc.request)
    check(sc, encoding)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_pydantic_ai_version_6_tool_role_messages(encoding: str) -> None:
    check(scenario(S.pydantic_parallel_retry, version=6), encoding)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_pydantic_ai_without_content_keeps_names_and_marks_args_absent(encoding: str) -> None:
    sc = scenario(S.pydantic_parallel_retry, version=5, include_content=False)
    runs = check(sc, encoding)
    assert all(not c.args_captured for c in runs[0].calls)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_pydantic_ai_instrument_all_through_the_global_provider(encoding: str) -> None:
    check(scenario(S.pydantic_parallel_retry, version=5, global_provider=True), encoding)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_pydantic_ai_test_model_calls_every_tool_with_generated_args(encoding: str) -> None:
    check(scenario(S.pydantic_test_model), encoding)


@pytest.mark.parametrize("version", [5, 2])
@pytest.mark.parametrize("encoding", ENCODINGS)
def test_pydantic_ai_agent_delegating_inside_a_tool_is_a_nested_run(encoding: str, version: int) -> None:
    sc = scenario(S.pydantic_delegation, version=version)
    runs = check(sc, encoding)
    (outer,) = runs
    (inner,) = outer.children
    assert inner.parent_run_id == outer.run_id
    assert inner.trace_id == outer.trace_id


# --------------------------------------------------------------------------- anthropic SDK + instrumentations

ANTHROPIC_CASES: dict[str, dict[str, object]] = {
    # (a) OpenInference
    "openinference_agent_span_selected_calls": {"instrumentation": ("oi",), "root": "oi_agent"},
    "openinference_agent_and_tool_spans_merge_by_position": {
        "instrumentation": ("oi",),
        "root": "oi_agent",
        "tools": "oi",
    },
    "openinference_streaming_under_genai_agent": {"instrumentation": ("oi",), "stream": True, "tools": "genai"},
    "openinference_without_any_span_around_the_loop": {"instrumentation": ("oi",), "root": None},
    # (b) OpenLLMetry
    "openllmetry_genai_agent_and_tool_spans_with_retries": {"instrumentation": ("ol",), "tools": "genai", "retries": 2},
    "openllmetry_streaming_under_a_plain_request_span": {"instrumentation": ("ol",), "root": "plain", "stream": True},
    "openllmetry_without_any_span_around_the_loop": {"instrumentation": ("ol",), "root": None},
    "openllmetry_content_off_gives_absent_args": {
        "instrumentation": ("ol",),
        "tools": "genai_no_args",
        "traceloop_content": False,
    },
    # (c) both instrumentations: every model call is two sibling LLM spans
    "openinference_and_openllmetry_together_count_each_call_once": {
        "instrumentation": ("oi", "ol"),
        "root": "oi_agent",
    },
    "openinference_and_openllmetry_together_with_tool_spans": {"instrumentation": ("oi", "ol"), "tools": "genai"},
    # (d) no instrumentation library: the SDK's own spans
    "native_spans_by_default_are_metadata_only": {"native": "default", "tools": "genai_no_args"},
    "native_content_mode_with_genai_tool_spans": {"native": "content", "tools": "genai"},
    "native_content_mode_streaming_with_retry": {"native": "content", "tools": "genai", "stream": True, "retries": 1},
    "native_metadata_under_a_plain_request_span": {"native": "metadata", "root": "plain", "tools": "genai"},
    "native_content_without_any_span_around_the_loop": {"native": "content", "root": None},
    # (e) native + OpenInference: one model call is an OI span with the SDK's span nested inside
    "native_and_openinference_nested_count_each_call_once": {
        "instrumentation": ("oi",),
        "native": "content",
        "root": "oi_agent",
    },
    "native_and_openinference_with_tool_spans": {"instrumentation": ("oi",), "native": "content", "tools": "genai"},
}


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("case", list(ANTHROPIC_CASES))
def test_anthropic_sdk_tool_loop_rebuilds_ground_truth(case: str, encoding: str) -> None:
    kwargs = ANTHROPIC_CASES[case]
    sc = scenario(S.anthropic_weather, **kwargs)
    if kwargs.get("root", "genai_agent") is None:
        assert len(S.trace_ids(sc.request)) == 3, "without a span around the loop every model call is its own trace"
    else:
        assert len(S.trace_ids(sc.request)) == 1
    check(sc, encoding)


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize(("content", "stream"), [(True, False), (False, False), (True, True)])
def test_anthropic_native_tool_runner_is_an_agent_run_with_tool_spans(
    content: bool, stream: bool, encoding: str
) -> None:
    sc = scenario(S.anthropic_tool_runner, content=content, stream=stream)
    names = S.span_names(sc.request)
    assert "anthropic.messages.tool_runner" in names
    assert names.count("anthropic.custom_tool_use get_weather") == 2
    check(sc, encoding)


def test_anthropic_sdk_native_spans_go_to_the_global_provider_unless_disabled() -> None:
    """Surprise worth pinning: anthropic>=2 traces every API call as soon as a global provider exists."""
    import anthropic

    from tests.support.capture import capture
    from tests.support.fake_anthropic import FakeAnthropic

    with capture() as cap, FakeAnthropic(["a", "b"]) as fake:
        anthropic.Anthropic(base_url=fake.base_url, api_key="k").messages.create(
            model=S.MODEL, max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )
        anthropic.Anthropic(base_url=fake.base_url, api_key="k", open_telemetry=False).messages.create(
            model=S.MODEL, max_tokens=5, messages=[{"role": "user", "content": "x"}]
        )
        spans = cap.spans()
    assert [s.name for s in spans] == ["anthropic.messages.create"]
    attrs = dict(spans[0].attributes or {})
    assert (
        attrs["gen_ai.operation.name"] == "chat" and spans[0].instrumentation_scope.name == "com.anthropic.sdk.python"
    )
    assert "gen_ai.input.messages" not in attrs  # metadata_only by default
    assert fake.requests[0].headers.get("traceparent")  # and it propagates its context to the API


# (f) an instrumentation beside the SDK's own spans, as users get them (native spans on by default, to the
# global provider): every model call is two sibling model spans, one step; issue #8. The same shapes recorded
# with traceloop-sdk 0.62.4 and OpenInference 3.1 + messages.stream: tests/fixtures/frameworks/
# {traceloop_sdk_anthropic,openinference_anthropic_stream}.
SIDE_BY_SIDE_CASES: dict[str, dict[str, object]] = {
    "openllmetry_beside_native_default_spans": {"instrumentation": ("ol",), "native": "default", "tools": "genai"},
    "openinference_streaming_beside_native_default_spans": {
        "instrumentation": ("oi",),
        "native": "default",
        "stream": True,
        "tools": "genai",
    },
}


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("case", list(SIDE_BY_SIDE_CASES))
def test_instrumentation_beside_native_spans_makes_one_step_per_model_call(case: str, encoding: str) -> None:
    sc = scenario(S.anthropic_weather, **SIDE_BY_SIDE_CASES[case])
    names = S.span_names(sc.request)
    assert names.count("anthropic.messages.create") == 3, names  # the SDK's own span for each of the 3 calls
    (run,) = check(sc, encoding)
    assert len(run.steps) == 3
    assert all(c.executed and c.step is not None for c in run.calls)
