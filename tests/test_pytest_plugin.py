"""The pytest plugin (``monitor.pytest_plugin``, entry point ``pytest11: monitor``), run with pytester on user test
files whose agents emit spans with the real OpenTelemetry SDK. Each run is a fresh pytest process (as in a user's
project: the plugin comes from the entry point, the global tracer provider starts unset)."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

pytest_plugins = ["pytester"]

AGENT = '''
import json

from opentelemetry import trace

tracer = trace.get_tracer("travel-agent")


def travel_agent(plan, provider=None):
    """A tiny agent instrumented with the OpenTelemetry GenAI conventions: one agent span, a tool span per call."""
    t = provider.get_tracer("travel-agent") if provider is not None else tracer
    with t.start_as_current_span(
        "invoke_agent travel",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel"},
    ):
        for name, args in plan:
            with t.start_as_current_span(
                f"execute_tool {name}",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": name,
                    "gen_ai.tool.call.arguments": json.dumps(args),
                },
            ):
                pass


PLAN = [
    ("get_weather", {"city": "Paris"}),
    ("get_time", {"tz": "CET"}),
    ("book_hotel", {"city": "Paris", "nights": 2}),
]
'''


def test_the_plugin_is_registered_through_the_pytest11_entry_point() -> None:
    (ep,) = [ep for ep in entry_points(group="pytest11") if ep.value == "monitor.pytest_plugin"]
    assert ep.name == "monitor"


def test_monitor_runs_rebuilds_the_agents_run_and_assert_tools_passes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(agent=AGENT)
    pytester.makepyfile(
        test_agent="""
        from agent import PLAN, travel_agent
        from monitor.pytest_plugin import assert_tools
        from monitor.testing import RunCapture


        def test_exact(monitor_runs):
            assert isinstance(monitor_runs, RunCapture)
            travel_agent(PLAN)
            run = monitor_runs.run()
            assert run.agent == "travel" and len(monitor_runs.runs()) == 1
            expected = [("get_weather", {"city": "Paris"}), "get_time", ("book_hotel", {"city": "Paris", "nights": 2})]
            result = assert_tools(run, expected)
            assert result.passed and result.scorer_kind == "trajectory_match"


        def test_in_order_any_order_and_subset(monitor_runs):
            travel_agent(PLAN)
            assert_tools(monitor_runs, ["get_weather", "book_hotel"], order="in_order")
            assert_tools(monitor_runs, ["book_hotel", "get_weather"], order="any_order")
            assert_tools(monitor_runs, [("book_hotel", {"city": "Paris"})], order="any_order", args="subset")
            assert_tools(monitor_runs, [("get_weather", {"city": "Rome"}), "get_time", "book_hotel"], args="ignore")


        def test_each_test_sees_only_its_own_spans(monitor_runs):
            travel_agent([("get_time", {"tz": "UTC"})])
            assert_tools(monitor_runs.run(), [("get_time", {"tz": "UTC"})])
            assert len(monitor_runs.spans()) == 2
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)


def test_a_failing_assertion_says_which_call_differed_and_how(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(agent=AGENT)
    pytester.makepyfile(
        test_agent="""
        from agent import PLAN, travel_agent
        from monitor.testing import assert_tools


        def test_wrong_city(monitor_runs):
            travel_agent(PLAN)
            assert_tools(monitor_runs.run(), ["get_weather", "get_time", ("book_hotel", {"city": "Rome", "nights": 2})])


        def test_missing_and_unexpected(monitor_runs):
            travel_agent(PLAN)
            assert_tools(monitor_runs.run(), ["get_weather", "search_flights", "book_hotel"])


        def test_out_of_order(monitor_runs):
            travel_agent(PLAN)
            assert_tools(monitor_runs.run(), ["book_hotel", "get_weather"], order="in_order")


        def test_no_run(monitor_runs):
            monitor_runs.run()
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=4)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: tool calls do not match (order='exact', args='exact')",
            "*expected: get_weather(…), get_time(…), book_hotel(city='Rome', nights=2)",
            "*actual:   #0 get_weather(city='Paris'), #1 get_time(tz='CET'), #2 book_hotel(city='Paris', nights=2)",
            "*- call #2 book_hotel: argument 'city' expected 'Rome', got 'Paris'",
        ]
    )
    result.stdout.fnmatch_lines(["*- call #1: expected search_flights(…), got get_time(tz='CET')"])
    result.stdout.fnmatch_lines(
        ["*- out of order: get_weather(…) is expected after call #2 book_hotel(city='Paris', nights=2)*(only at #0)"]
    )
    result.stdout.fnmatch_lines(["*AssertionError: expected one agent run, captured no run from 0 span(s):"])


def test_a_provider_the_code_uses_directly_can_be_attached(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(agent=AGENT)
    pytester.makepyfile(
        test_agent="""
        from opentelemetry.sdk.trace import TracerProvider

        from agent import travel_agent
        from monitor.testing import assert_tools

        PRIVATE = TracerProvider()


        def test_private_provider(monitor_runs):
            monitor_runs.attach(PRIVATE)
            travel_agent([("lookup_order", {"id": 7})], provider=PRIVATE)
            assert_tools(monitor_runs.run(agent="travel"), [("lookup_order", {"id": 7})])
            assert monitor_runs.spans()[0].resource is PRIVATE.resource
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_the_plugin_can_be_switched_off(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x(monitor_runs):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:monitor")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'monitor_runs' not found*"])
