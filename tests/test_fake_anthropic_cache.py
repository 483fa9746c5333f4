"""The fake server's prompt-caching simulation (``FakeAnthropic(cache=True)``) through the real ``anthropic``
SDK: prefix order tools → system → messages, breakpoints and their TTLs, the minimum cacheable length, the
20-block lookback, automatic caching, the 4-breakpoint limit, batches, and a judge's cached static blocks."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from monitor.judging.runner import send_with
from monitor.scoring.judges import GoalAccuracyJudge
from monitor.scoring.judges.protocol import JudgeConfig
from monitor.scoring.judges.task import JudgeTask
from monitor.testing import FakeAnthropic
from tests.scoring.builders import run_with_steps

SONNET = "claude-sonnet-4-6"
LONG = "Instructions. " * 600  # ≈ 8,400 characters: ≈ 2,100 tokens at 4 characters a token


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def cached(text: str, ttl: str | None = None) -> dict[str, Any]:
    control: dict[str, Any] = {"type": "ephemeral"}
    if ttl:
        control["ttl"] = ttl
    return {"type": "text", "text": text, "cache_control": control}


def usage(client: anthropic.Anthropic, model: str = SONNET, **body: Any) -> dict[str, Any]:
    body.setdefault("messages", [{"role": "user", "content": "hello"}])
    message = client.messages.create(model=model, max_tokens=16, **body)
    dumped: dict[str, Any] = message.usage.model_dump(mode="json", exclude_none=True)
    return dumped


def prompt(u: dict[str, Any]) -> int:
    return int(u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"])


def test_the_first_request_writes_the_prefix_and_the_next_reads_it() -> None:
    with FakeAnthropic(default="ok", cache=True) as fake:
        client = fake.client(max_retries=0)
        first = usage(client, system=[cached(LONG)])
        second = usage(client, system=[cached(LONG)], messages=[{"role": "user", "content": "another question"}])
    assert first["cache_read_input_tokens"] == 0 and first["cache_creation_input_tokens"] > 1024
    assert first["cache_creation"] == {
        "ephemeral_5m_input_tokens": first["cache_creation_input_tokens"],
        "ephemeral_1h_input_tokens": 0,
    }
    assert second["cache_creation_input_tokens"] == 0
    assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert 0 < first["input_tokens"] < second["input_tokens"]  # only what follows the breakpoint is plain input


def test_without_cache_nothing_changes() -> None:
    with FakeAnthropic(default="ok") as fake:
        client = fake.client(max_retries=0)
        first, second = (usage(client, system=[cached(LONG)]) for _ in range(2))
    assert first == second and first["cache_read_input_tokens"] == first["cache_creation_input_tokens"] == 0
    assert "cache_creation" not in first


def test_a_prefix_below_the_model_minimum_is_not_cached_and_no_error_is_returned() -> None:
    with FakeAnthropic(default="ok", cache=True) as fake:
        assert [fake.min_cacheable_tokens(m) for m in ("claude-haiku-4-5-20251001", "claude-opus-4-6", SONNET)] == [
            4096,
            4096,
            1024,
        ]
        assert fake.min_cacheable_tokens("claude-3-haiku-20240307") == 2048
        client = fake.client(max_retries=0)
        haiku = [usage(client, model="claude-haiku-4-5", system=[cached(LONG)]) for _ in range(2)]
        sonnet = [usage(client, model=SONNET, system=[cached(LONG)]) for _ in range(2)]
    assert all(u["cache_creation_input_tokens"] == u["cache_read_input_tokens"] == 0 for u in haiku)
    assert sonnet[1]["cache_read_input_tokens"] > 0  # ≈ 2,100 tokens: above Sonnet's 1,024
    assert prompt(haiku[0]) == prompt(sonnet[0])
    with FakeAnthropic(default="ok", cache=True, cache_min_tokens={"claude-haiku-4-5": 100}) as fake:
        client = fake.client(max_retries=0)
        usage(client, model="claude-haiku-4-5", system=[cached(LONG)])
        assert usage(client, model="claude-haiku-4-5", system=[cached(LONG)])["cache_read_input_tokens"] > 0


def test_entries_live_five_minutes_from_their_last_use_or_one_hour() -> None:
    clock = Clock()
    with FakeAnthropic(default="ok", cache=True, cache_clock=clock) as fake:
        client = fake.client(max_retries=0)
        usage(client, system=[cached(LONG)])
        clock.now = 299.0
        assert usage(client, system=[cached(LONG)])["cache_read_input_tokens"] > 0  # a hit refreshes the TTL
        clock.now = 598.0
        assert usage(client, system=[cached(LONG)])["cache_read_input_tokens"] > 0
        clock.now = 898.5
        missed = usage(client, system=[cached(LONG)])
        assert missed["cache_read_input_tokens"] == 0 and missed["cache_creation_input_tokens"] > 0
        fake.clear_cache()
        hour = usage(client, system=[cached("Hour. " * 1000, "1h")])
        assert hour["cache_creation"]["ephemeral_1h_input_tokens"] == hour["cache_creation_input_tokens"] > 0
        clock.now += 3000.0
        assert usage(client, system=[cached("Hour. " * 1000, "1h")])["cache_read_input_tokens"] > 0
        clock.now += 3601.0
        assert usage(client, system=[cached("Hour. " * 1000, "1h")])["cache_read_input_tokens"] == 0


def test_prefix_order_is_tools_then_system_then_messages() -> None:
    tool = {"name": "lookup", "description": "Look up a thing", "input_schema": {"type": "object"}}
    other_tool = {**tool, "description": "Look up another thing"}
    with FakeAnthropic(default="ok", cache=True) as fake:
        client = fake.client(max_retries=0)

        def ask(tools: list[dict[str, Any]], question: str, **kw: Any) -> dict[str, Any]:
            messages = [{"role": "user", "content": [cached(question + " " + "context " * 200)]}]
            return usage(client, tools=tools, system=[cached(LONG)], messages=messages, **kw)

        first = ask([tool], "q1")
        # another message: tools + system are read, the new message is written (second breakpoint)
        other_message = ask([tool], "q2")
        assert 0 < other_message["cache_read_input_tokens"] < first["cache_creation_input_tokens"]
        assert other_message["cache_creation_input_tokens"] > 0
        # the same message again: everything up to the last breakpoint is read
        again = ask([tool], "q2")
        assert again["cache_read_input_tokens"] == prompt(again) - again["input_tokens"]
        assert again["cache_creation_input_tokens"] == 0
        # tool_choice changes invalidate the cached messages, not the tools and system
        choice = ask([tool], "q2", tool_choice={"type": "tool", "name": "lookup"})
        assert choice["cache_read_input_tokens"] == other_message["cache_read_input_tokens"]
        # another tool definition: tools come first, so nothing is read
        changed = ask([other_tool], "q2")
        assert changed["cache_read_input_tokens"] == 0 and changed["cache_creation_input_tokens"] > 0


def test_a_breakpoint_reads_a_prefix_cached_up_to_20_blocks_before_it() -> None:
    def conversation(turns: int) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        for i in range(turns):
            messages.append({"role": "user", "content": [{"type": "text", "text": f"question {i} " + "x" * 400}]})
            messages.append({"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}]})
        messages.append({"role": "user", "content": [cached("last question")]})
        return messages

    with FakeAnthropic(default="ok", cache=True) as fake:
        client = fake.client(max_retries=0)
        base = conversation(3)
        usage(client, system=[cached(LONG)], messages=base)  # caches system and the 7 message blocks
        # 5 more turns (10 blocks) after the old breakpoint's block: within the lookback
        grown = [*base[:-1], {"role": "user", "content": [{"type": "text", "text": "last question"}]}]
        grown += [*conversation(5)[:-1], {"role": "user", "content": [cached("new last")]}]
        near = usage(client, system=[cached(LONG)], messages=grown)
        # 15 more turns (30 blocks): too far back; only the system breakpoint is found
        far_msgs = [*grown[:-1], *conversation(15)[:-1], {"role": "user", "content": [cached("far last")]}]
        far = usage(client, system=[cached(LONG)], messages=far_msgs)
    system_only = usage_of_system(fake)
    assert near["cache_read_input_tokens"] > system_only
    assert far["cache_read_input_tokens"] == system_only


def usage_of_system(fake: FakeAnthropic) -> int:
    """Tokens of the system prefix alone (its own entry, as the API reports it for a fresh request)."""
    with FakeAnthropic(default="ok", cache=True) as fresh:
        u = usage(fresh.client(max_retries=0), system=[cached(LONG)], messages=[{"role": "user", "content": "x"}])
    return int(u["cache_creation_input_tokens"])


def test_automatic_caching_and_the_breakpoint_limit() -> None:
    with FakeAnthropic(default="ok", cache=True) as fake:
        client = fake.client(max_retries=0)
        body = {"system": LONG, "messages": [{"role": "user", "content": "hello"}]}
        first = usage(client, extra_body={"cache_control": {"type": "ephemeral"}}, **body)
        second = usage(client, extra_body={"cache_control": {"type": "ephemeral"}}, **body)
        assert first["cache_creation_input_tokens"] == prompt(first) and first["input_tokens"] == 0
        assert second["cache_read_input_tokens"] == prompt(second)
        with pytest.raises(anthropic.BadRequestError) as raised:
            usage(client, system=[cached(f"block {i} " + LONG) for i in range(5)])
        assert "A maximum of 4 blocks with cache_control" in str(raised.value)
        assert fake.unexpected == ["invalid request: 5 cache_control blocks"]


def test_usage_overrides_still_win() -> None:
    with FakeAnthropic(default="ok", cache=True, usage={"cache_read_input_tokens": 7}) as fake:
        u = usage(fake.client(max_retries=0), system=[cached(LONG)])
    assert u["cache_read_input_tokens"] == 7 and u["cache_creation_input_tokens"] > 0


def test_the_requests_of_a_batch_read_what_the_first_wrote() -> None:
    params = {"model": SONNET, "max_tokens": 16, "system": [cached(LONG)]}
    with FakeAnthropic(default="ok", cache=True) as fake:
        client = fake.client(max_retries=0)
        batch = client.messages.batches.create(
            requests=[
                {"custom_id": f"r{i}", "params": {**params, "messages": [{"role": "user", "content": f"q{i}"}]}}  # type: ignore[typeddict-item]
                for i in range(3)
            ]
        )
        results = [r.result for r in client.messages.batches.results(batch.id)]
    usages = [r.message.usage for r in results if r.type == "succeeded"]
    assert [u.service_tier for u in usages] == ["batch"] * 3
    assert usages[0].cache_creation_input_tokens and not usages[0].cache_read_input_tokens
    assert [u.cache_read_input_tokens for u in usages[1:]] == [usages[0].cache_creation_input_tokens] * 2


def test_a_judge_reads_its_cached_static_blocks_on_the_next_run() -> None:
    """§4.0: S1 (instructions) with cache_control, tools first: a second run's request reads the static prefix
    and pays plain input only for its own user message."""
    config = JudgeConfig(model=SONNET)
    runs = [
        run_with_steps([[("get_weather", {"city": c})]], user_text=f"weather in {c}?", trace_id=f"{i:032x}")
        for i, c in enumerate(("Paris", "Rome"))
    ]
    bodies = [JudgeTask(GoalAccuracyJudge(), run, None, config).pending()[0].body for run in runs]
    with FakeAnthropic(default="ok", cache=True, cache_min_tokens=200) as fake:
        send = send_with(fake.client(max_retries=0))
        first, second = (dict(send(body)["usage"]) for body in bodies)
    assert first["cache_creation_input_tokens"] > 0 and first["cache_read_input_tokens"] == 0
    assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert second["input_tokens"] == prompt(second) - second["cache_read_input_tokens"]
