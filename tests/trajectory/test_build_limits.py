"""Rebuild depth and cost are bounded: a too-deep trace is a typed, one-line rejection, never a RecursionError.

Wall-clock time is not asserted (the machine is shared); the figures are in the report of the change
(400-deep nested agents: rejected in a few ms with the default limits, rebuilt in tens of ms without them).
"""

from __future__ import annotations

import itertools
import sys

import pytest

from monitor.trajectory.build import (
    DEFAULT_MAX_AGENT_DEPTH,
    DEFAULT_MAX_DEPTH,
    RebuildRejected,
    build_runs,
)
from monitor.trajectory.spans import SpanRecord
from monitor.trajectory.view import view

TRACE = "0123456789abcdef0123456789abcdef"
OTHER_TRACE = "fedcba9876543210fedcba9876543210"
UNLIMITED: dict[str, int] = {"max_depth": 10**9, "max_agent_depth": 10**9}


def _id(n: int) -> str:
    return f"{n + 1:016x}"


def nested_agents_via_tools(depth: int, trace_id: str = TRACE) -> list[SpanRecord]:
    """agent 0 → execute_tool ask → agent 1 → … : each agent asks the next one through a tool call."""
    spans: list[SpanRecord] = []
    parent: str | None = None
    end = 10**12
    for d in range(depth):
        agent, tool = _id(2 * d), _id(2 * d + 1)
        spans.append(
            SpanRecord(
                trace_id,
                agent,
                parent,
                f"invoke_agent a{d}",
                start_ns=10 * d,
                end_ns=end - 10 * d,
                attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": f"a{d}"},
            )
        )
        spans.append(
            SpanRecord(
                trace_id,
                tool,
                agent,
                "execute_tool ask",
                start_ns=10 * d + 5,
                end_ns=end - 10 * d - 5,
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "ask",
                    "gen_ai.tool.call.arguments": f'{{"level": {d}}}',
                },
            )
        )
        parent = tool
    return spans


def nested_agents_by_transfer(depth: int) -> list[SpanRecord]:
    """agent 0 → agent 1 → … directly (each a different agent: a transfer), one span per agent."""
    spans: list[SpanRecord] = []
    parent: str | None = None
    for d in range(depth):
        spans.append(
            SpanRecord(
                TRACE,
                _id(d),
                parent,
                f"invoke_agent a{d}",
                start_ns=d,
                end_ns=10**12 - d,
                attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": f"a{d}"},
            )
        )
        parent = _id(d)
    return spans


def plain_chain(depth: int) -> list[SpanRecord]:
    """``depth`` spans of no convention, each the parent of the next, a model call at the bottom."""
    spans = [
        SpanRecord(TRACE, _id(d), _id(d - 1) if d else None, f"step {d}", start_ns=d, end_ns=10**12 - d)
        for d in range(depth - 1)
    ]
    spans.append(
        SpanRecord(
            TRACE,
            _id(depth - 1),
            _id(depth - 2),
            "chat m",
            start_ns=depth,
            end_ns=depth + 1,
            attributes={"gen_ai.operation.name": "chat"},
        )
    )
    return spans


def _assert_one_line(exc: RebuildRejected, *words: str) -> None:
    text = str(exc)
    assert exc.reason == "too_deep"
    assert "\n" not in text and len(text) < 200 and text.startswith("too_deep: ")
    for word in words:
        assert word in text


def test_400_nested_agents_are_rejected_with_a_one_line_reason_by_default() -> None:
    with pytest.raises(RebuildRejected) as caught:
        build_runs(nested_agents_via_tools(400))
    _assert_one_line(caught.value, TRACE, "max_depth", str(DEFAULT_MAX_DEPTH))


def test_400_nested_agents_rebuild_completely_when_the_limits_allow_it() -> None:
    (root,) = build_runs(nested_agents_via_tools(400), **UNLIMITED)
    runs = list(root.walk())
    assert [r.agent for r in runs] == [f"a{d}" for d in range(400)]
    assert all(child.parent_run_id == parent.run_id for parent, child in itertools.pairwise(runs))
    flat = view(root)
    assert len(flat) == 400 and [c.depth for c in flat] == list(range(400))
    assert [c.kind for c in flat] == ["agent"] * 399 + ["function"]  # the last agent's tool starts no agent


def test_agent_nesting_beyond_max_agent_depth_is_rejected_though_the_span_chain_is_short() -> None:
    spans = nested_agents_by_transfer(DEFAULT_MAX_AGENT_DEPTH + 1)
    with pytest.raises(RebuildRejected) as caught:
        build_runs(spans)
    _assert_one_line(caught.value, "max_agent_depth", str(DEFAULT_MAX_AGENT_DEPTH))
    (root,) = build_runs(nested_agents_by_transfer(DEFAULT_MAX_AGENT_DEPTH))
    assert sum(1 for _ in root.walk()) == DEFAULT_MAX_AGENT_DEPTH


def test_a_span_chain_exactly_max_depth_long_rebuilds_and_one_more_is_rejected() -> None:
    (run,) = build_runs(plain_chain(50), max_depth=50)
    assert len(run.steps) == 1
    with pytest.raises(RebuildRejected):
        build_runs(plain_chain(51), max_depth=50)


def test_5000_deep_plain_span_chain_is_rejected_by_default_and_rebuilt_without_limits() -> None:
    with pytest.raises(RebuildRejected):
        build_runs(plain_chain(5000))
    (run,) = build_runs(plain_chain(5000), **UNLIMITED)
    assert len(run.steps) == 1 and run.agent is None


@pytest.mark.parametrize("shape", ["via_tools", "by_transfer", "plain_chain"])
def test_depth_10000_never_raises_recursion_error_at_the_default_recursion_limit(shape: str) -> None:
    assert sys.getrecursionlimit() <= 1000, "the test must run at Python's default recursion limit"
    spans: list[SpanRecord] = {
        "via_tools": lambda: nested_agents_via_tools(5000),  # 10,000 spans deep
        "by_transfer": lambda: nested_agents_by_transfer(10_000),
        "plain_chain": lambda: plain_chain(10_000),
    }[shape]()
    with pytest.raises(RebuildRejected):
        build_runs(spans)
    (root,) = build_runs(spans, **UNLIMITED)
    runs = list(root.walk())
    assert len(runs) == {"via_tools": 5000, "by_transfer": 10_000, "plain_chain": 1}[shape]
    assert len(view(root)) == (5000 if shape == "via_tools" else 0)


def test_rejected_traces_can_be_collected_while_the_others_rebuild() -> None:
    shallow = nested_agents_via_tools(2, trace_id=OTHER_TRACE)
    rejected: list[RebuildRejected] = []
    runs = build_runs(nested_agents_via_tools(400) + shallow, rejected=rejected)
    assert [r.trace_id for r in runs] == [OTHER_TRACE]
    (exc,) = rejected
    _assert_one_line(exc, TRACE)


def test_a_parent_cycle_neither_hangs_nor_raises() -> None:
    a = SpanRecord(TRACE, _id(0), _id(1), "chat m", start_ns=1, end_ns=2, attributes={"gen_ai.operation.name": "chat"})
    b = SpanRecord(TRACE, _id(1), _id(0), "chat m", start_ns=1, end_ns=2, attributes={"gen_ai.operation.name": "chat"})
    root = SpanRecord(TRACE, _id(2), None, "chat m", start_ns=3, end_ns=4, attributes={"gen_ai.operation.name": "chat"})
    assert [r.run_id for r in build_runs([a, b, root])] == [_id(2)]


def test_rejection_message_stays_one_short_line_whatever_the_detail() -> None:
    exc = RebuildRejected("too_deep", "x" * 500 + "\nsecond line")
    assert "\n" not in str(exc) and len(str(exc)) < 200 and exc.reason == "too_deep"
