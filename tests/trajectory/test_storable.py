"""Content parsed out of attributes is storable: JSON (or Python repr) text inside an attribute can hold
escapes of lone surrogates and NUL, NaN / Infinity literals, and Python-only values; the rebuild repairs
them (monitor/trajectory/sanitize.py, docs/decoding.md) and never raises on them.

The attribute strings here are what the decoder hands over (no raw NUL or surrogate: tests/ingest covers
that); the trouble hides in the text they carry.
"""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.trajectory.build import build_runs
from monitor.trajectory.sanitize import parse_json, storable
from monitor.trajectory.serialize import run_to_json
from monitor.trajectory.spans import SpanRecord

TRACE = "0123456789abcdef0123456789abcdef"


def _span(span_id: str, parent: str | None, **attributes: Any) -> SpanRecord:
    return SpanRecord(TRACE, span_id, parent, "s", start_ns=1, end_ns=2, attributes=attributes)


def _stored(runs: list[Any]) -> str:
    """What a store writes: the runs as strict JSON, encoded as UTF-8 (raises on anything unstorable)."""
    text = json.dumps([run_to_json(r) for r in runs], allow_nan=False, ensure_ascii=False)
    text.encode("utf-8")
    assert "\x00" not in text
    return text


def test_escaped_surrogates_nul_and_non_finite_numbers_in_tool_arguments_are_repaired() -> None:
    args = '{"city": "Par\\ud800is", "note": "a\\u0000b", "t": NaN, "big": 1e999, "neg": -Infinity, "ok": 1.5}'
    spans = [
        _span("a" * 16, None, **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "x"}),
        _span(
            "b" * 16,
            "a" * 16,
            **{
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.arguments": args,
                "gen_ai.tool.call.result": '["\\udfff"]',
            },
        ),
    ]
    (run,) = build_runs(spans)
    (call,) = run.calls
    assert call.args == {
        "city": "Par\ufffdis",
        "note": "a\ufffdb",
        "t": "NaN",
        "big": "Infinity",
        "neg": "-Infinity",
        "ok": 1.5,
    }
    assert call.result == ["\ufffd"]
    _stored([run])


def test_python_repr_content_becomes_json_values() -> None:
    """OpenLLMetry's LangChain ``input_str`` is a Python repr: read with literal_eval, made JSON."""
    spans = [
        _span(
            "b" * 16,
            None,
            **{
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "f",
                "gen_ai.tool.call.arguments": "{'s': {1, 2}, 'b': b'\\xff', 'c': 1j, 't': (1, '\\ud800'), 'k': {1: 2}}",
            },
        )
    ]
    (run,) = build_runs(spans)
    assert run.calls[0].args == {"s": [1, 2], "b": "\ufffd", "c": "1j", "t": [1, "\ufffd"], "k": {"1": 2}}
    _stored([run])


def test_bytes_values_become_text_without_nul() -> None:
    """An OTLP ``bytesValue`` holding arguments or a result: decoded as UTF-8, NUL and bad bytes replaced."""
    spans = [
        _span(
            "b" * 16,
            None,
            **{
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "f",
                "gen_ai.tool.call.arguments": b"\xff\x00",
                "gen_ai.tool.call.result": b"ok\x00done",
            },
        )
    ]
    (run,) = build_runs(spans)
    assert run.calls[0].args_raw == "\ufffd\ufffd" and run.calls[0].result == "ok\ufffddone"
    _stored([run])


def test_token_counts_that_are_not_int64_numbers_are_not_reported_and_never_raise() -> None:
    """``"²".isdigit()`` is true but ``int("²")`` raises: the rebuild used to crash on such a usage value."""
    for value in ("²", "9" * 30, 2**70, 1e300, "１２"):
        (run,) = build_runs(
            [_span("c" * 16, None, **{"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": value})]
        )
        assert run.steps[0].usage.input_tokens is None


def test_deeply_nested_message_content_never_raises_recursion_error() -> None:
    """A tool message whose content nests lists hundreds deep (what json.loads still accepts)."""
    for depth in (300, 600, 900):
        content = "[" * depth + '"x"' + "]" * depth
        messages = '[{"role": "tool", "tool_call_id": "t1", "content": ' + content + "}]"
        wrapped = '{"message":' * depth + '{"role": "assistant", "content": "y"}' + "}" * depth
        for key, value in (("gen_ai.input.messages", messages), ("gen_ai.output.messages", wrapped)):
            build_runs([_span("d" * 16, None, **{"gen_ai.operation.name": "chat", key: value})])


def test_storable_walks_any_depth_without_recursion() -> None:
    doc: Any = "\ud800"
    for _ in range(100_000):
        doc = [doc, float("nan")]
    fixed = storable(doc)
    for _ in range(100_000):
        assert fixed[1] == "NaN"
        fixed = fixed[0]
    assert fixed == "\ufffd"


def test_parse_json_leaves_clean_documents_untouched() -> None:
    text = '{"a": [1, 2.5, "x\\u00e9", {"b": null}], "c": true}'
    assert parse_json(text) == json.loads(text)


nasty_text = st.text(
    alphabet=st.one_of(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), st.just("\x00"), st.characters()),
    max_size=8,
)
nasty_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), nasty_text),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(nasty_text, inner, max_size=3),
    max_leaves=10,
)
message_shapes = st.one_of(
    nasty_json,
    st.builds(
        lambda role, parts: [{"role": role, "parts": parts}],
        st.sampled_from(["user", "assistant", "tool"]),
        st.lists(
            st.fixed_dictionaries(
                {"type": st.sampled_from(["text", "tool_call", "tool_call_response"])},
                optional={
                    "content": nasty_text,
                    "name": nasty_text,
                    "id": nasty_text,
                    "arguments": nasty_json,
                    "response": nasty_json,
                },
            ),
            max_size=3,
        ),
    ),
)


CONTENT_KEYS = [
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.definitions",
    "input.value",
    "output.value",
    "traceloop.entity.input",
    "traceloop.entity.output",
    "tool_arguments",
    "final_result",
    "pydantic_ai.all_messages",
    "gcp.vertex.agent.llm_request",
    "gcp.vertex.agent.tool_call_args",
]


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    values=st.dictionaries(st.sampled_from(CONTENT_KEYS), message_shapes, min_size=1, max_size=4),
    encoder=st.sampled_from(["json", "repr"]),
    op=st.sampled_from(["chat", "execute_tool", "invoke_agent", "x"]),
)
def test_any_content_in_attribute_text_rebuilds_into_storable_runs(
    values: dict[str, Any], encoder: str, op: str
) -> None:
    """JSON text carries lone surrogates and NUL only as escapes, and NaN / Infinity as literals; a Python
    repr carries them as escapes too. Whatever the content, the runs it rebuilds are storable."""
    dump = json.dumps if encoder == "json" else repr
    attributes = {key: dump(value) for key, value in values.items()}
    attributes["gen_ai.operation.name"] = op
    attributes["gen_ai.tool.name"] = "f"
    runs = build_runs([_span("e" * 16, None, **attributes)])
    for run in runs:
        for r in run.walk():
            for c in r.calls:
                assert not isinstance(c.args, float) or math.isfinite(c.args)
    _stored(runs)
