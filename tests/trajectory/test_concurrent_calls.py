"""Calls that start in the same instant keep the order the model asked for them, not the order of their span ids.

Mastra's spans have millisecond timestamps: two tools the model requested in one step often start in the same
millisecond (tests/fixtures/frameworks/mastra_arize/parallel, whose notes say so). Timestamps cannot order them then;
the model's own order can. Mastra records it on its ``model_step`` span's output, a Vercel AI SDK step result
``{text, toolCalls}``, which becomes the step's tool-call parts, and the tool spans join them by call id. A live
recording once tied and rebuilt Berlin before Tokyo (tests/integration/test_live_generators.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from monitor.trajectory.messages import parse_messages
from monitor.trajectory.model import Message, TextPart, ToolCallPart
from tests.integration.test_framework_fixtures import FIXTURES, _load
from tests.support.scenarios import rebuild

PARALLEL = FIXTURES / "mastra_arize" / "parallel.expected.json"


def _tool_spans(request: Any) -> dict[str, Any]:
    """The fixture's two ``execute_tool`` spans by the city they were called for."""
    found: dict[str, Any] = {}
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                if span.name.startswith("execute_tool"):
                    city = next(a.value.string_value for a in span.attributes if a.key == "input.value")
                    found["Tokyo" if "Tokyo" in city else "Berlin"] = span
    assert set(found) == {"Tokyo", "Berlin"}
    return found


@pytest.mark.parametrize("berlin_id_first", [True, False])
def test_tools_starting_in_the_same_millisecond_keep_the_models_order(berlin_id_first: bool) -> None:
    _, request, logs = _load(PARALLEL)
    spans = _tool_spans(request)
    spans["Berlin"].start_time_unix_nano = spans["Tokyo"].start_time_unix_nano  # the tie the live run met
    low, high = bytes.fromhex("00000000000000a1"), bytes.fromhex("ffffffffffffffa2")
    spans["Berlin"].span_id, spans["Tokyo"].span_id = (low, high) if berlin_id_first else (high, low)
    for seed in (1, 7, 11):
        (run,) = rebuild(request, logs, encoding="otlp_proto", parts=3, seed=seed)
        assert [c.args for c in run.calls] == [{"city": "Tokyo"}, {"city": "Berlin"}]
        assert [(c.step, c.part, c.call_id) for c in run.calls] == [(0, 0, "call_0_0"), (0, 1, "call_0_1")]


def test_mastra_generation_keeps_its_answer_and_gains_the_calls_of_its_first_step() -> None:
    _, request, logs = _load(PARALLEL)
    (run,) = rebuild(request, logs, encoding="otlp_proto", parts=1, seed=1)
    (step,) = run.steps
    assert step.text == "Tokyo: 21°C, light rain. Berlin: 12°C, cloudy."
    assert [(p.name, p.id, p.arguments) for p in step.tool_calls] == [
        ("get_weather", "call_0_0", {"city": "Tokyo"}),
        ("get_weather", "call_0_1", {"city": "Berlin"}),
    ]


def test_a_step_result_reads_as_an_assistant_message_in_the_models_order() -> None:
    value = (
        '{"text":"checking","toolCalls":[{"toolCallId":"a","toolName":"f","args":{"x":1}},'
        '{"toolCallId":"b","toolName":"g","input":"{\\"y\\": 2}"},7]}'
    )
    assert parse_messages(value, "assistant") == (
        Message(
            "assistant",
            (TextPart("checking"), ToolCallPart("f", "a", {"x": 1}), ToolCallPart("g", "b", {"y": 2})),
        ),
    )
    assert parse_messages('{"text":"","toolCalls":[]}', "assistant") == (Message("assistant", ()),)
