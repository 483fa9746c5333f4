"""FakeAnthropic (``monitor.testing``) against the real ``anthropic`` SDK: sync, streaming, errors/retries, batches,
judge verdicts, rate limits and slow answers."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import anthropic
import pytest

from tests.support.fake_anthropic import Error, FakeAnthropic, Turn, tool_results

MODEL = "claude-test-model"
USER = [{"role": "user", "content": "hi"}]


def client(fake: FakeAnthropic, **kwargs: object) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=fake.base_url, api_key="test-key", open_telemetry=False, **kwargs)  # type: ignore[arg-type]


def test_text_turn_is_a_complete_message_with_usage() -> None:
    with FakeAnthropic(
        ["Hello there."], usage={"cache_read_input_tokens": 120, "cache_creation_input_tokens": 7}
    ) as fake:
        message = client(fake).messages.create(model=MODEL, max_tokens=50, messages=USER)
    assert message.content[0].type == "text" and message.content[0].text == "Hello there."
    assert message.stop_reason == "end_turn" and message.role == "assistant" and message.model == MODEL
    assert message.id.startswith("msg_01")
    assert message.usage.cache_read_input_tokens == 120
    assert message.usage.cache_creation_input_tokens == 7
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    assert fake.message_requests == [{"model": MODEL, "max_tokens": 50, "messages": USER}]
    assert fake.unexpected == []


def test_parallel_tool_uses_get_distinct_toolu_ids_and_stop_reason_tool_use() -> None:
    with FakeAnthropic([[("get_weather", {"city": "Paris"}), ("get_time", {"tz": "CET"})]]) as fake:
        message = client(fake).messages.create(model=MODEL, max_tokens=50, messages=USER)
    blocks = message.content
    assert [(b.type, b.name, b.input) for b in blocks] == [  # type: ignore[union-attr]
        ("tool_use", "get_weather", {"city": "Paris"}),
        ("tool_use", "get_time", {"tz": "CET"}),
    ]
    ids = [b.id for b in blocks]  # type: ignore[union-attr]
    assert all(i.startswith("toolu_01") for i in ids) and len(set(ids)) == 2
    assert message.stop_reason == "tool_use"


def test_turn_with_thinking_text_and_tool_use_and_usage_override() -> None:
    turn = Turn(text="Let me check.", thinking="hmm", tool_uses=[("lookup", {"q": 1})], usage={"input_tokens": 999})
    with FakeAnthropic([turn]) as fake:
        message = client(fake).messages.create(model=MODEL, max_tokens=50, messages=USER)
    assert [b.type for b in message.content] == ["thinking", "text", "tool_use"]
    assert message.usage.input_tokens == 999


def test_callable_turn_sees_the_request_and_tool_results() -> None:
    def answer(request: dict) -> object:
        results = tool_results(request)
        if not results:
            return [("echo", {"text": request["messages"][0]["content"]})]
        return f"tool said {results[0]['content']}"

    with FakeAnthropic(answer) as fake:
        c = client(fake)
        first = c.messages.create(model=MODEL, max_tokens=50, messages=[{"role": "user", "content": "ping"}])
        use = first.content[0]
        assert use.type == "tool_use" and use.input == {"text": "ping"}
        second = c.messages.create(
            model=MODEL,
            max_tokens=50,
            messages=[
                {"role": "user", "content": "ping"},
                {"role": "assistant", "content": [use.model_dump(include={"type", "id", "name", "input"})]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "pong"}]},
            ],
        )
    assert second.content[0].text == "tool said pong"  # type: ignore[union-attr]
    assert fake.turns_used == 2


def test_dict_turn_is_filled_in() -> None:
    with FakeAnthropic([{"content": [{"type": "text", "text": "raw"}], "stop_reason": "max_tokens"}]) as fake:
        message = client(fake).messages.create(model=MODEL, max_tokens=5, messages=USER)
    assert message.stop_reason == "max_tokens" and message.content[0].text == "raw"  # type: ignore[union-attr]


def test_streaming_emits_the_exact_event_sequence_and_rebuilds_the_message() -> None:
    turn = Turn(text="It is sunny in Paris today.", tool_uses=[("get_weather", {"city": "Paris", "days": [1, 2]})])
    with FakeAnthropic([turn], stream_chunk=4, usage={"cache_read_input_tokens": 3}) as fake:
        c = client(fake)
        raw = c.messages.create(model=MODEL, max_tokens=50, messages=USER, stream=True)
        events = list(raw)
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds[1] == "content_block_start" and "content_block_stop" in kinds
    deltas = [e.delta.type for e in events if e.type == "content_block_delta"]  # type: ignore[union-attr]
    assert "text_delta" in deltas and "input_json_delta" in deltas
    message_delta = events[-2]
    assert message_delta.delta.stop_reason == "tool_use"  # type: ignore[union-attr]
    assert message_delta.usage.output_tokens > 1  # type: ignore[union-attr]
    assert message_delta.usage.cache_read_input_tokens == 3  # type: ignore[union-attr]

    with (
        FakeAnthropic([turn], stream_chunk=3) as fake,
        client(fake).messages.stream(model=MODEL, max_tokens=50, messages=USER) as stream,
    ):
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "It is sunny in Paris today."
    assert [b.type for b in final.content] == ["text", "tool_use"]
    assert final.content[1].input == {"city": "Paris", "days": [1, 2]}  # type: ignore[union-attr]
    assert final.stop_reason == "tool_use"
    assert fake.message_requests[0]["stream"] is True


def test_streaming_thinking_blocks_round_trip() -> None:
    with (
        FakeAnthropic([Turn(thinking="step by step", text="42")]) as fake,
        client(fake).messages.stream(model=MODEL, max_tokens=50, messages=USER) as stream,
    ):
        final = stream.get_final_message()
    assert final.content[0].type == "thinking" and final.content[0].thinking == "step by step"  # type: ignore[union-attr]
    assert final.content[0].signature == "fake-signature"  # type: ignore[union-attr]


@pytest.mark.parametrize("status", [429, 500, 529])
def test_sdk_retries_injected_errors_then_succeeds(status: int) -> None:
    with FakeAnthropic([Error(status), Error(status), "finally"]) as fake:
        message = client(fake, max_retries=2).messages.create(model=MODEL, max_tokens=5, messages=USER)
    assert message.content[0].text == "finally"  # type: ignore[union-attr]
    assert [r.status for r in fake.requests] == [status, status, 200]
    assert (
        fake.requests[0].response["error"]["type"]
        == {429: "rate_limit_error", 500: "api_error", 529: "overloaded_error"}[status]
    )
    retry_counts = [r.headers.get("x-stainless-retry-count") for r in fake.requests]
    assert retry_counts == ["0", "1", "2"]


def test_errors_surface_as_typed_sdk_exceptions_without_retry() -> None:
    with FakeAnthropic([Error(429, "slow down")]) as fake, pytest.raises(anthropic.RateLimitError) as info:
        client(fake, max_retries=0).messages.create(model=MODEL, max_tokens=5, messages=USER)
    assert info.value.status_code == 429
    assert info.value.body["error"] == {"type": "rate_limit_error", "message": "slow down"}  # type: ignore[index]

    with FakeAnthropic() as fake:
        fake.fail_next(529, count=1)
        with pytest.raises(anthropic.InternalServerError) as info2:
            client(fake, max_retries=0).messages.create(model=MODEL, max_tokens=5, messages=USER)
        assert info2.value.status_code == 529


def test_error_mid_stream_raises_in_the_sdk() -> None:
    with (
        FakeAnthropic([Error(529, mid_stream=True)]) as fake,
        pytest.raises(anthropic.APIStatusError),
        client(fake, max_retries=0).messages.stream(model=MODEL, max_tokens=5, messages=USER) as stream,
    ):
        stream.get_final_message()


def test_exhausted_script_and_invalid_requests_are_reported() -> None:
    with FakeAnthropic(["only"]) as fake:
        c = client(fake, max_retries=0)
        c.messages.create(model=MODEL, max_tokens=5, messages=USER)
        with pytest.raises(anthropic.InternalServerError):
            c.messages.create(model=MODEL, max_tokens=5, messages=USER)
        assert fake.unexpected and "exhausted" in fake.unexpected[0]
    with FakeAnthropic(["x"]) as fake, pytest.raises(anthropic.BadRequestError):
        client(fake, max_retries=0).messages.create(model=MODEL, max_tokens=5, messages=[])
    with FakeAnthropic(default="again") as fake:
        c = client(fake)
        assert [c.messages.create(model=MODEL, max_tokens=5, messages=USER).content[0].text for _ in range(3)] == [  # type: ignore[union-attr]
            "again"
        ] * 3


def test_batches_complete_after_configured_polls_and_stream_jsonl_results() -> None:
    params = {"model": MODEL, "max_tokens": 20, "messages": USER}
    with FakeAnthropic(["first", Error(500, "boom"), [("t", {"a": 1})]], batch_polls=2) as fake:
        c = client(fake)
        batch = c.messages.batches.create(
            requests=[{"custom_id": f"r{i}", "params": params} for i in range(3)]  # type: ignore[misc]
        )
        assert batch.id.startswith("msgbatch_01") and batch.processing_status == "in_progress"
        assert batch.request_counts.processing == 3 and batch.results_url is None
        statuses = [c.messages.batches.retrieve(batch.id).processing_status for _ in range(3)]
        assert statuses == ["in_progress", "ended", "ended"]
        ended = c.messages.batches.retrieve(batch.id)
        assert (ended.request_counts.succeeded, ended.request_counts.errored) == (2, 1)
        results = {r.custom_id: r.result for r in c.messages.batches.results(batch.id)}
        listed = list(c.messages.batches.list())
    assert results["r0"].type == "succeeded" and results["r0"].message.content[0].text == "first"  # type: ignore[union-attr]
    assert results["r1"].type == "errored" and results["r1"].error.error.message == "boom"  # type: ignore[union-attr]
    assert results["r2"].message.content[0].name == "t"  # type: ignore[union-attr]
    assert [b.id for b in listed] == [batch.id]
    assert fake.unexpected == []


def test_batch_completes_immediately_by_default_and_cancel_cancels() -> None:
    params = {"model": MODEL, "max_tokens": 20, "messages": USER}
    with FakeAnthropic(["a", "b"], batch_polls=5) as fake:
        c = client(fake)
        batch = c.messages.batches.create(requests=[{"custom_id": "x", "params": params}])  # type: ignore[misc]
        canceling = c.messages.batches.cancel(batch.id)
        assert canceling.processing_status == "canceling" and canceling.cancel_initiated_at is not None
        ended = c.messages.batches.retrieve(batch.id)
        assert ended.processing_status == "ended" and ended.request_counts.canceled == 1
        assert [r.result.type for r in c.messages.batches.results(batch.id)] == ["canceled"]
        fake.batch_polls = 0
        quick = c.messages.batches.create(requests=[{"custom_id": "y", "params": params}])  # type: ignore[misc]
        assert quick.processing_status == "ended" and quick.results_url is not None
        with pytest.raises(anthropic.NotFoundError):
            c.messages.batches.retrieve("msgbatch_missing")


def test_server_is_stdlib_http_on_loopback_and_records_raw_requests() -> None:
    with FakeAnthropic(["plain"]) as fake:
        assert fake.base_url.startswith("http://127.0.0.1:")
        body = json.dumps({"model": MODEL, "max_tokens": 5, "messages": USER}).encode()
        req = urllib.request.Request(
            fake.base_url + "/v1/messages", data=body, headers={"content-type": "application/json"}
        )
        with urllib.request.urlopen(req) as resp:
            answer = json.loads(resp.read())
            assert resp.headers["request-id"].startswith("req_")
        count = json.loads(
            urllib.request.urlopen(
                urllib.request.Request(fake.base_url + "/v1/messages/count_tokens", data=body, method="POST")
            ).read()
        )
    assert answer["content"] == [{"type": "text", "text": "plain"}]
    assert count["input_tokens"] > 0
    assert fake.requests[0].path == "/v1/messages" and fake.requests[0].status == 200


# ------------------------------------------------------------------ judges, faults, slow answers

VERDICT_TOOL = {
    "name": "record_verdict",
    "description": "Record the verdict.",
    "input_schema": {
        "type": "object",
        "properties": {"score": {"type": "number"}, "reason": {"type": "string"}},
        "required": ["score", "reason"],
    },
}


def judge_request(c: anthropic.Anthropic, **kwargs: object) -> anthropic.types.Message:
    return c.messages.create(  # type: ignore[call-overload,no-any-return]
        model=MODEL,
        max_tokens=200,
        messages=USER,
        tools=[VERDICT_TOOL],
        tool_choice={"type": "tool", "name": "record_verdict"},
        **kwargs,
    )


def test_one_import_path_for_the_shipped_fake() -> None:
    import monitor.testing
    import tests.support.fake_anthropic as support

    assert monitor.testing.FakeAnthropic is FakeAnthropic is support.FakeAnthropic
    assert monitor.testing.Turn is Turn and monitor.testing.AnthropicError is Error


def test_script_verdict_answers_a_forced_tool_choice_with_one_tool_use_block() -> None:
    with FakeAnthropic() as fake:
        fake.script_verdict("record_verdict", {"score": 0.8, "reason": "right tool"}, usage={"output_tokens": 12})
        message = judge_request(fake.client())
    (block,) = message.content
    assert block.type == "tool_use" and block.name == "record_verdict"
    assert block.input == {"score": 0.8, "reason": "right tool"}
    assert message.stop_reason == "tool_use" and message.usage.output_tokens == 12
    assert fake.message_requests[0]["tool_choice"] == {"type": "tool", "name": "record_verdict"}
    assert fake.unexpected == []


def test_script_verdict_checks_the_request_and_the_verdict() -> None:
    with FakeAnthropic() as fake:
        c = fake.client(max_retries=0)
        fake.script_verdict("record_verdict", {"score": 1})
        with pytest.raises(anthropic.BadRequestError):  # the tool is not offered: 400, as the API
            c.messages.create(model=MODEL, max_tokens=5, messages=USER)
        assert "does not offer" in fake.unexpected[-1]
        fake.script_verdict("record_verdict", {"score": 1})  # misses the required "reason": noted, still sent
        assert judge_request(c).content[0].input == {"score": 1}  # type: ignore[union-attr]
        assert "misses required properties ['reason']" in fake.unexpected[-1]
        fake.script_verdict("other_tool", {"x": 1})
        with pytest.raises(anthropic.BadRequestError):
            judge_request(c)
        assert "forces 'record_verdict'" in fake.unexpected[-1]
        fake.script_verdict("record_verdict", {"score": "bad"}, check=False)
        assert judge_request(c).content[0].input == {"score": "bad"}  # type: ignore[union-attr]
        assert len(fake.unexpected) == 3


def test_script_verdict_answers_batch_requests_too() -> None:
    params = {
        "model": MODEL,
        "max_tokens": 50,
        "messages": USER,
        "tools": [VERDICT_TOOL],
        "tool_choice": {"type": "tool", "name": "record_verdict"},
    }
    with FakeAnthropic() as fake:
        fake.script_verdict("record_verdict", {"score": 1.0, "reason": "a"})
        fake.script_verdict("record_verdict", {"score": 0.0, "reason": "b"})
        c = fake.client()
        batch = c.messages.batches.create(requests=[{"custom_id": f"r{i}", "params": params} for i in range(2)])  # type: ignore[misc]
        results = {r.custom_id: r.result for r in c.messages.batches.results(batch.id)}
    assert results["r1"].message.content[0].input == {"score": 0.0, "reason": "b"}  # type: ignore[union-attr]
    assert fake.unexpected == []


def test_rate_limit_sends_retry_after_in_seconds_and_the_sdk_waits_for_it() -> None:
    with FakeAnthropic(["ok"]) as fake:
        fake.rate_limit(retry_after=2, headers={"anthropic-ratelimit-requests-remaining": "0"})
        with pytest.raises(anthropic.RateLimitError) as info:
            fake.client(max_retries=0).messages.create(model=MODEL, max_tokens=5, messages=USER)
        headers = info.value.response.headers
        assert headers["retry-after"] == "2" and "retry-after-ms" not in headers
        assert headers["anthropic-ratelimit-requests-remaining"] == "0"
        assert info.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]

        fake.rate_limit(retry_after=0.3)
        started = time.monotonic()
        answer = fake.client(max_retries=1).messages.create(model=MODEL, max_tokens=5, messages=USER)
        assert time.monotonic() - started >= 0.3 and answer.content[0].text == "ok"  # type: ignore[union-attr]
    assert [r.status for r in fake.requests] == [429, 429, 200]


def test_overloaded_and_server_errors_carry_anthropics_error_types() -> None:
    with FakeAnthropic() as fake:
        c = fake.client(max_retries=0)
        fake.overloaded()
        fake.server_error(503)
        fake.server_error(504)
        for status, kind in [(529, "overloaded_error"), (503, "api_error"), (504, "timeout_error")]:
            with pytest.raises(anthropic.APIStatusError) as info:
                c.messages.create(model=MODEL, max_tokens=5, messages=USER)
            assert info.value.status_code == status and info.value.body["error"]["type"] == kind  # type: ignore[index]
        with pytest.raises(ValueError):
            fake.server_error(429)
        assert fake.turns_used == 0, "injected errors consume no turn"


def test_slow_answers_time_the_client_out_and_the_script_goes_on() -> None:
    with FakeAnthropic(["late", "on time", Turn(text="turn delay", delay=0.3)]) as fake:
        fake.delay_next(1.0)
        c = fake.client(max_retries=0, timeout=0.3)
        with pytest.raises(anthropic.APITimeoutError):
            c.messages.create(model=MODEL, max_tokens=5, messages=USER)
        assert c.messages.create(model=MODEL, max_tokens=5, messages=USER).content[0].text == "on time"  # type: ignore[union-attr]
        started = time.monotonic()
        slow = fake.client(max_retries=0, timeout=5).messages.create(model=MODEL, max_tokens=5, messages=USER)
        assert slow.content[0].text == "turn delay" and time.monotonic() - started >= 0.3  # type: ignore[union-attr]
    assert fake.unexpected == []


def test_latency_applies_to_every_answer_and_stop_does_not_wait_for_delays() -> None:
    fake = FakeAnthropic(default="x", latency=0.2).start()
    started = time.monotonic()
    fake.client().messages.create(model=MODEL, max_tokens=5, messages=USER)
    assert time.monotonic() - started >= 0.2
    fake.delay_next(30)
    errors: list[Exception] = []

    def call() -> None:
        try:
            fake.client(max_retries=0).messages.create(model=MODEL, max_tokens=5, messages=USER)
        except anthropic.APIConnectionError as exc:
            errors.append(exc)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    time.sleep(0.3)
    started = time.monotonic()
    fake.stop()
    assert time.monotonic() - started < 5
    thread.join(10)
    assert len(errors) == 1, "the delayed request's connection is dropped"


def test_env_points_a_subprocess_sdk_at_the_fake() -> None:
    with FakeAnthropic() as fake:
        assert fake.env() == {"ANTHROPIC_BASE_URL": fake.base_url, "ANTHROPIC_API_KEY": "test-key"}
