"""The span-key priority table (``monitor/trajectory/keytable.py``): well formed, documented, and
read by ``normalize`` in the order the conventions reference states (``otel-agent-spans.md`` §7).

The priorities below are written out by hand from the reference, not derived from the table, so a
row moved in the table fails here."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

import pytest

from monitor.ingest.decode import decode_logs, decode_traces
from monitor.trajectory.keytable import (
    FACT_SCOPE,
    ROWS,
    RULES,
    Check,
    Fact,
    Read,
    Role,
    fact_classifier,
    render_markdown,
)
from monitor.trajectory.model import ABSENT
from monitor.trajectory.normalize import SpanFacts, detect_role, normalize
from monitor.trajectory.semconv import Op
from monitor.trajectory.spans import SpanEvent, SpanRecord

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "frameworks"

UNRECORDED: dict[str, str] = {
    # keys of the table that no recorded fixture carries, with where the reference defines them
    "gen_ai.usage.cache_creation_input_tokens": "Anthropic usage name, next to strands' cache_read_input_tokens (§4.3)",
    "llm.token_count.prompt_details.cache_write": "OpenInference token counts (§2)",
    "graph.node.name": "OpenInference agent / graph structure (§2)",
    "gen_ai.aggregated_usage.input_tokens": "pydantic-ai agent span (§4.2)",
    "gen_ai.aggregated_usage.output_tokens": "pydantic-ai agent span (§4.2)",
    "mcp.method.name": "MCP semantic conventions",
    "pydantic_ai.tool.failure_stage": "pydantic-ai tool failure (§4.2); the live pydantic-ai tests record it",
    "traceloop.association.properties.session_id": "OpenLLMetry association properties (§3.1, §2 session keys)",
    "traceloop.association.properties.conversation_id": "OpenLLMetry association properties (§3.1, §2 session keys)",
    "traceloop.association.properties.thread_id": "OpenLLMetry association properties (§3.1, §2 session keys)",
}


# --------------------------------------------------------------------------- the table's shape


def test_every_fact_has_rows_or_rules_and_a_scope() -> None:
    covered = {r.fact for r in ROWS} | {r.fact for r in RULES}
    assert covered == set(Fact)
    assert set(FACT_SCOPE) == set(Fact)
    assert not ({r.fact for r in ROWS} & {r.fact for r in RULES})


def test_rows_are_well_formed() -> None:
    for fact in Fact:
        rows = [r for r in ROWS if r.fact is fact]
        tiers = [r.tier for r in rows]
        assert tiers == sorted(tiers), f"{fact}: tiers out of order"
        events = [r for r in rows if r.read is Read.EVENTS]
        if events:  # read by normalize's own pass over the span events, after every attribute row
            assert all(r.tier == max(tiers) for r in events), fact
            assert all(r.tier < max(tiers) for r in rows if r.read is not Read.EVENTS), fact
        for row in rows:
            assert (row.read is Read.FUNCTION) == (row.reader is not None), row
            assert row.ref, row
            for fn in (row.decode, row.when, row.reader):
                # named functions, so the documentation can name them
                assert fn is None or fn.__name__ != "<lambda>", row


def test_rules_are_well_formed() -> None:
    for rule in RULES:
        assert rule.ref, rule
        assert rule.value is not None, rule
    # the inference operations are exactly Op.INFERENCE
    llm_ops: set[str] = set()
    for rule in RULES:
        if rule.fact is Fact.ROLE and rule.value is Role.LLM and rule.test.key == "gen_ai.operation.name":
            llm_ops |= rule.test.values
    assert llm_ops == Op.INFERENCE
    for fact in (Fact.ROLE, Fact.TOOL_KIND):
        fact_classifier(fact, None)  # compiles: no value twice in consecutive rules on one key


def test_the_docs_show_the_table() -> None:
    text = (REPO / "docs" / "decoding.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- keytable:begin -->\n(.*)<!-- keytable:end -->", text, re.S)
    assert m is not None, "docs/decoding.md lost its keytable markers"
    assert m.group(1) == render_markdown(), (
        "docs/decoding.md is out of date: paste the output of "
        '`python -c "from monitor.trajectory.keytable import render_markdown; print(render_markdown())"`'
    )


def _fixture_keys() -> set[str]:
    keys: set[str] = set()

    def add(attrs: Any) -> None:
        if isinstance(attrs, dict):
            keys.update(attrs)

    for path in sorted(FIXTURES.glob("*/*.traces.pb")):
        for span in decode_traces(path.read_bytes()):
            add(span.attributes)
            for ev in span.events:
                add(ev.attributes)
                add(ev.body)
    for path in sorted(FIXTURES.glob("*/*.logs.pb")):
        for log in decode_logs(path.read_bytes()):
            add(log.attributes)
            add(log.body)
    return keys


def _table_keys() -> set[str]:
    keys = {r.key for r in ROWS if r.read in (Read.ATTR, Read.ATTR_SET, Read.MERGED)}
    attribute_checks = (
        Check.TEXT_IN, Check.VALUE_IN, Check.IS_TEXT, Check.NO_TEXT, Check.HAS_TEXT, Check.HAS, Check.IS_TRUE
    )  # fmt: skip
    for rule in RULES:
        for test in (rule.test, rule.also):
            if test is not None and test.check in attribute_checks:
                keys.add(test.key)
    return keys


def test_every_key_is_recorded_in_a_fixture_or_referenced() -> None:
    recorded = _fixture_keys()
    table = _table_keys()
    missing = sorted(k for k in table if k not in recorded and k not in UNRECORDED)
    assert not missing, f"keys neither recorded in tests/fixtures/frameworks nor listed in UNRECORDED: {missing}"
    stale = sorted(k for k in UNRECORDED if k in recorded or k not in table)
    assert not stale, f"UNRECORDED lists keys that are recorded now, or no longer in the table: {stale}"
    prefixes = [r.test.key for r in RULES if r.test.check is Check.HAS_PREFIX]
    for prefix in prefixes:
        assert any(k.startswith(prefix) for k in recorded), prefix


# --------------------------------------------------------------------------- the priority, as the reference states it

# §7 and the framework sections, written out: (fact, base attributes, keys highest priority first)
TOOL = {"gen_ai.operation.name": "execute_tool"}
AGENT = {"gen_ai.operation.name": "invoke_agent"}
PRIORITIES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("tool_name", {**TOOL, "traceloop.span.kind": "tool"}, ["gen_ai.tool.name", "tool.name", "traceloop.entity.name"]),
    ("call_id", TOOL, ["gen_ai.tool.call.id", "tool.id", "tool_call.id"]),
    (
        "args",
        TOOL,
        [
            "gen_ai.tool.call.arguments",
            "input.value",
            "tool_arguments",
            "gcp.vertex.agent.tool_call_args",
            "traceloop.entity.input",
        ],
    ),
    (
        "result",
        TOOL,
        [
            "gen_ai.tool.call.result",
            "output.value",
            "tool_response",
            "gcp.vertex.agent.tool_response",
            "traceloop.entity.output",
        ],
    ),
    ("model", AGENT, ["gen_ai.response.model", "gen_ai.request.model", "llm.model_name", "model_name"]),
    ("provider", AGENT, ["gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system"]),
    (
        "conversation_id",
        TOOL,
        [
            "gen_ai.conversation.id",
            "session.id",
            "gcp.vertex.agent.session_id",
            "traceloop.association.properties.session_id",
            "traceloop.association.properties.conversation_id",
            "traceloop.association.properties.thread_id",
        ],
    ),
    (
        "agent_name",
        {**AGENT, "traceloop.span.kind": "agent", "openinference.span.kind": "AGENT"},
        ["gen_ai.agent.name", "agent.name", "agent_name", "traceloop.entity.name", "graph.node.name", "graph.node.id"],
    ),
]


def _span(
    name: str, attrs: dict[str, Any], events: tuple[SpanEvent, ...] = (), parent: str | None = "p" * 16
) -> SpanRecord:
    return SpanRecord("t" * 32, "s" * 16, parent, name, attributes=attrs, events=events)


def _value_of(facts: SpanFacts, fact: str) -> Any:
    value = getattr(facts, fact)
    return value.get("from") if isinstance(value, dict) else value


@pytest.mark.parametrize(("fact", "base", "keys"), PRIORITIES, ids=[p[0] for p in PRIORITIES])
def test_normalize_reads_the_keys_in_the_documented_priority(fact: str, base: dict[str, Any], keys: list[str]) -> None:
    """With every key present, the first one wins; remove it, and the next one wins; and so on."""
    for i, key in enumerate(keys):
        attrs = {**base, **{k: json.dumps({"from": k}) if fact in ("args", "result") else k for k in keys[i:]}}
        assert _value_of(normalize(_span("span", attrs)), fact) == key, f"{fact}: {keys[i:]}"


def test_span_names_come_after_the_attributes() -> None:
    tool = normalize(_span("execute_tool from_name", {**TOOL, "tool.name": "from_attribute"}))
    assert tool.tool_name == "from_attribute"
    assert normalize(_span("execute_tool from_name", TOOL)).tool_name == "from_name"
    assert normalize(_span("my_tool", {"openinference.span.kind": "TOOL"})).tool_name == "my_tool"
    agent = normalize(_span("invoke_agent from_name", AGENT))
    assert (agent.agent_name, agent.agent_name_weak) == ("from_name", False)
    oi_root = normalize(_span("Agent workflow", {"openinference.span.kind": "AGENT"}))
    assert (oi_root.agent_name, oi_root.agent_name_weak) == ("Agent workflow", True)


def test_a_present_key_decides_its_tier_even_when_it_decodes_to_nothing() -> None:
    """Keys of one tier are not a chain of fallbacks for unusable values (the documented semantics)."""
    blank = normalize(_span("t", {**TOOL, "gen_ai.conversation.id": "  ", "session.id": "s1"}))
    assert blank.conversation_id is None
    next_tier = {**TOOL, "gen_ai.conversation.id": "  ", "traceloop.association.properties.thread_id": "th"}
    assert normalize(_span("t", next_tier)).conversation_id == "th"
    adk = normalize(_span("t", {**TOOL, "gen_ai.tool.call.id": "<not specified>", "tool.id": "x"}))
    assert adk.call_id is None


def test_model_messages_fall_through_tiers_until_one_parses() -> None:
    """Message tiers: GenAI attributes, OpenInference, OpenLLMetry legacy, ADK, events, then input.value."""
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": "{}",  # what ADK writes with capture off: no messages, next tier
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "from OpenInference",
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": "from OpenLLMetry",
        "input.value": "from input.value",
    }

    def first_text() -> Any:
        messages = normalize(_span("chat m", attrs)).input_messages
        assert messages is not None
        return messages[0].parts[0].content  # type: ignore[union-attr]

    assert first_text() == "from OpenInference"
    del attrs["llm.input_messages.0.message.role"], attrs["llm.input_messages.0.message.content"]
    assert first_text() == "from OpenLLMetry"
    del attrs["gen_ai.prompt.0.role"], attrs["gen_ai.prompt.0.content"]
    assert first_text() == "from input.value"
    attrs["gen_ai.input.messages"] = "a plain string is one user message"
    assert first_text() == "a plain string is one user message"


def test_strands_events_come_after_the_attributes() -> None:
    events = (
        SpanEvent("gen_ai.tool.message", attributes={"content": '{"from": "event"}', "id": "call_ev"}),
        SpanEvent("gen_ai.choice", attributes={"message": '[{"text": "from event"}]'}),
    )
    from_events = normalize(_span("execute_tool f", {**TOOL, "gen_ai.tool.name": "f"}, events))
    assert (from_events.args, from_events.result, from_events.call_id) == ({"from": "event"}, "from event", "call_ev")
    attrs = {**TOOL, "gen_ai.tool.name": "f", "gen_ai.tool.call.arguments": '{"from": "attribute"}'}
    from_attrs = normalize(_span("execute_tool f", attrs, events))
    # the event pass still reads the result, but the call id only rides with the arguments' event
    assert (from_attrs.args, from_attrs.result, from_attrs.call_id) == ({"from": "attribute"}, "from event", None)


def test_role_rules_in_the_documented_order() -> None:
    """§0.3 and §7: operation name, then OpenInference, then OpenLLMetry, then span names and keys."""
    assert detect_role(_span("x", {"gen_ai.operation.name": "chat", "openinference.span.kind": "TOOL"})) is Role.LLM
    assert detect_role(_span("x", {"openinference.span.kind": "TOOL", "traceloop.span.kind": "agent"})) is Role.TOOL
    assert detect_role(_span("invoke_agent a", {"traceloop.span.kind": "tool"})) is Role.TOOL
    assert detect_role(_span("x", {"openinference.span.kind": "CHAIN"}, parent=None)) is Role.WORKFLOW
    assert detect_role(_span("x", {"openinference.span.kind": "CHAIN"})) is Role.OTHER
    assert detect_role(_span("running tool", {})) is Role.TOOL
    assert detect_role(_span("x", {"gen_ai.tool.name": "t"})) is Role.TOOL
    assert detect_role(_span("x", {"gen_ai.tool.name": "t", "gen_ai.operation.name": "plan"})) is Role.OTHER
    assert detect_role(_span("x", {"gen_ai.tool.name": "(merged tools)", **TOOL})) is Role.SYNTHETIC
    assert detect_role(_span("x", {"gen_ai.operation.name": "plan", "gen_ai.request.model": "m"})) is Role.LLM
    assert detect_role(_span("x", {"gen_ai.request.model": "m"})) is Role.OTHER


def test_tool_kind_rules() -> None:
    assert normalize(_span("t", {**TOOL, "gen_ai.tool.type": "McpTool"})).tool_kind == "mcp"
    assert (
        normalize(_span("t", {**TOOL, "mcp.method.name": "tools/call", "gen_ai.tool.type": "AgentTool"})).tool_kind
        == "mcp"
    )
    assert normalize(_span("t", {**TOOL, "gen_ai.tool.type": " AgentTool "})).tool_kind == "agent"
    assert normalize(_span("t", {**TOOL, "gen_ai.tool.type": "FunctionTool"})).tool_kind == "function"


def test_the_normalizer_spells_no_priority_of_its_own() -> None:
    """The tool, model and agent facts come from the table: no attribute key is read inline for them."""
    import monitor.trajectory.normalize as normalize_module

    for name in ("_tool_facts", "_model_io", "_agent_facts", "_common", "_handoff_facts", "detect_role"):
        source = inspect.getsource(getattr(normalize_module, name))
        assert ".get(" not in source, name


def test_adk_capture_off_hides_both_arguments_and_response() -> None:
    attrs = {
        **TOOL,
        "gen_ai.tool.name": "f",
        "gcp.vertex.agent.tool_call_args": "{}",
        "gcp.vertex.agent.tool_response": "{}",
    }
    facts = normalize(_span("execute_tool f", attrs))
    assert (facts.args, facts.result) == (ABSENT, ABSENT)
