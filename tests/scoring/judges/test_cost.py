"""Token accounting and cost of judge requests (SCORING.md §4.0), checked against figures computed by hand
from the per-million-token prices of the built-in ``judge.prices`` table (monitor/settings.py)."""

from __future__ import annotations

from typing import Any

import pytest
from anthropic.types import CacheCreation
from anthropic.types import Usage as ApiUsage

from monitor.scoring.judges.cost import ZERO, Usage, cost_usd, min_cacheable_tokens, price_for
from monitor.settings import DEFAULT_JUDGE_PRICES, ModelPrice

PRICES = DEFAULT_JUDGE_PRICES
M = 1_000_000


def approx(value: float) -> Any:
    return pytest.approx(value, rel=1e-12, abs=1e-15)


# --------------------------------------------------------------------------- the formula, by hand


def test_sonnet_4_6_every_token_kind_5m_1h_and_batch() -> None:
    usage = Usage(
        input_tokens=1000, cache_creation_input_tokens=2000, cache_read_input_tokens=3000, output_tokens=500, requests=1
    )
    # $3 in, $15 out: 1000×3 + 2000×3×1.25 + 3000×0.30 + 500×15 = 3000 + 7500 + 900 + 7500 = 18 900 µ$·M
    assert cost_usd(usage, "claude-sonnet-4-6", PRICES, "5m") == approx(0.0189)
    # 1h writes at 2 × input: 2000×6 = 12 000 → 3000 + 12 000 + 900 + 7500 = 23 400
    assert cost_usd(usage, "claude-sonnet-4-6", PRICES, "1h") == approx(0.0234)
    batch = Usage(**{**_fields(usage), "batch": True})
    assert cost_usd(batch, "claude-sonnet-4-6", PRICES, "5m") == approx(0.00945)
    assert cost_usd(batch, "claude-sonnet-4-6", PRICES, "1h") == approx(0.0117)


def test_haiku_4_5_typical_judge_call() -> None:
    # 6000 cached static tokens read, 1800 dynamic input, 350 output: $1 in, $5 out, reads $0.10
    usage = Usage(input_tokens=1800, cache_read_input_tokens=6000, output_tokens=350, requests=1)
    # 1800×1 + 6000×0.1 + 350×5 = 1800 + 600 + 1750 = 4150 → $0.00415
    assert cost_usd(usage, "claude-haiku-4-5", PRICES) == approx(0.00415)


@pytest.mark.parametrize(
    ("model", "p_in", "write_5m", "write_1h", "read", "p_out"),
    [
        # the published per-MTok columns of https://platform.claude.com/docs/en/about-claude/pricing
        ("claude-fable-5-1", 10.0, 12.50, 20.0, 0.25, 50.0),
        ("claude-opus-5-5", 4.0, 5.0, 8.0, 0.20, 20.0),
        ("claude-opus-4-7", 5.0, 6.25, 10.0, 0.50, 25.0),
        ("claude-sonnet-5-5", 2.0, 2.50, 4.0, 0.10, 10.0),
        ("claude-sonnet-5", 2.0, 2.50, 4.0, 0.20, 10.0),
        ("claude-sonnet-4-6", 3.0, 3.75, 6.0, 0.30, 15.0),
        ("claude-haiku-5-5", 0.10, 0.125, 0.20, 0.01, 0.50),
        ("claude-haiku-4-5", 1.0, 1.25, 2.0, 0.10, 5.0),
    ],
)
def test_one_million_tokens_of_each_kind_costs_the_published_rate(
    model: str, p_in: float, write_5m: float, write_1h: float, read: float, p_out: float
) -> None:
    n = 20  # 50 000 tokens a request: below Haiku 5.5's long-prompt band
    assert cost_usd(Usage(input_tokens=M, requests=n), model, PRICES) == approx(p_in)
    assert cost_usd(Usage(cache_creation_input_tokens=M, requests=n), model, PRICES, "5m") == approx(write_5m)
    assert cost_usd(Usage(cache_creation_input_tokens=M, requests=n), model, PRICES, "1h") == approx(write_1h)
    assert cost_usd(Usage(cache_read_input_tokens=M, requests=n), model, PRICES) == approx(read)
    assert cost_usd(Usage(output_tokens=M, requests=n), model, PRICES) == approx(p_out)
    assert cost_usd(Usage(output_tokens=M, requests=n, batch=True), model, PRICES) == approx(p_out / 2)


def test_haiku_5_5_long_prompts_pay_five_times_every_rate() -> None:
    short = Usage(input_tokens=90_000, output_tokens=1000, requests=1)
    # 90 000×0.10 + 1000×0.50 = 9000 + 500 = 9500 → $0.0095
    assert cost_usd(short, "claude-haiku-5-5", PRICES) == approx(0.0095)
    long = Usage(input_tokens=20_000, cache_read_input_tokens=100_000, output_tokens=1000, requests=1)
    # prompt 120 000 > 100 000: 20 000×0.50 + 100 000×0.05 + 1000×2.50 = 10 000 + 5000 + 2500 → $0.0175
    assert cost_usd(long, "claude-haiku-5-5", PRICES) == approx(0.0175)
    # two requests of 90 000 each: the mean prompt per request decides (lower band)
    assert cost_usd(short + short, "claude-haiku-5-5", PRICES) == approx(0.019)
    # exactly at the threshold: still the lower band
    assert cost_usd(Usage(input_tokens=100_000, requests=1), "claude-haiku-5-5", PRICES) == approx(0.01)


def test_unknown_model_is_none_and_a_dated_snapshot_is_priced_as_its_alias() -> None:
    usage = Usage(input_tokens=1000, output_tokens=100, requests=1)
    assert cost_usd(usage, "claude-nonexistent-9", PRICES) is None
    assert price_for("claude-nonexistent-9", PRICES) is None
    assert cost_usd(usage, "claude-haiku-4-5-20251001", PRICES) == cost_usd(usage, "claude-haiku-4-5", PRICES)
    own = {**PRICES, "claude-haiku-4-5-20251001": ModelPrice(input_per_mtok=2.0, output_per_mtok=10.0)}
    assert cost_usd(usage, "claude-haiku-4-5-20251001", own) == approx(0.003)  # the dated row wins


def test_price_rows_may_be_plain_mappings() -> None:
    usage = Usage(input_tokens=1000, cache_creation_input_tokens=2000, cache_read_input_tokens=3000, output_tokens=500)
    rows = {"m": {"input_per_mtok": 3.0, "output_per_mtok": 15.0, "cache_read_per_mtok": None}}
    assert cost_usd(usage, "m", rows) == cost_usd(usage, "claude-sonnet-4-6", PRICES)


def test_zero_usage_costs_nothing_and_a_bad_ttl_is_an_error() -> None:
    assert cost_usd(ZERO, "claude-opus-4-7", PRICES) == 0.0
    with pytest.raises(ValueError, match="cache_ttl"):
        cost_usd(ZERO, "claude-opus-4-7", PRICES, "10m")


def test_min_cacheable_tokens_from_the_table() -> None:
    assert min_cacheable_tokens("claude-haiku-4-5", PRICES) == 4096
    assert min_cacheable_tokens("claude-sonnet-4-6-20260101", PRICES) == 1024
    assert min_cacheable_tokens("claude-sonnet-5", PRICES) is None  # not published in the sources checked
    assert min_cacheable_tokens("claude-nonexistent-9", PRICES) is None


# --------------------------------------------------------------------------- Usage


def _fields(usage: Usage) -> dict[str, Any]:
    return {name: getattr(usage, name) for name in Usage.__dataclass_fields__}


def test_usage_sums_over_retries() -> None:
    first = Usage(input_tokens=10, cache_creation_input_tokens=4000, output_tokens=1024, requests=1)
    retry = Usage(input_tokens=60, cache_read_input_tokens=4000, output_tokens=300, requests=1)
    total = first + retry
    assert _fields(total) == {
        "input_tokens": 70,
        "cache_creation_input_tokens": 4000,
        "cache_read_input_tokens": 4000,
        "output_tokens": 1324,
        "requests": 2,
        "batch": False,
    }
    assert total.prompt_tokens == 8070
    assert sum([first, retry], ZERO) == total
    assert ZERO + Usage(requests=1, batch=True) == Usage(requests=1, batch=True)


def test_batch_and_non_batch_usage_do_not_mix() -> None:
    with pytest.raises(ValueError, match="batch"):
        Usage(requests=1) + Usage(requests=1, batch=True)
    with pytest.raises(ValueError, match="negative"):
        Usage(input_tokens=-1)


def test_from_api_reads_the_sdk_usage_and_its_json() -> None:
    api = ApiUsage(
        input_tokens=12,
        output_tokens=340,
        cache_creation_input_tokens=4100,
        cache_read_input_tokens=None,
        cache_creation=CacheCreation(ephemeral_5m_input_tokens=4100, ephemeral_1h_input_tokens=0),
        service_tier="standard",
    )
    expected = Usage(input_tokens=12, cache_creation_input_tokens=4100, output_tokens=340, requests=1)
    assert Usage.from_api(api) == expected
    assert Usage.from_api(api.model_dump(mode="json")) == expected
    assert Usage.from_api(api.model_dump(mode="json", exclude_none=True)) == expected
    batch = api.model_copy(update={"service_tier": "batch"})
    assert Usage.from_api(batch).batch is True
    assert Usage.from_api({"input_tokens": 5, "output_tokens": 1, "requests": 3, "batch": True}) == Usage(
        input_tokens=5, output_tokens=1, requests=3, batch=True
    )
    assert Usage.from_api({}, requests=2, batch=False) == Usage(requests=2)
