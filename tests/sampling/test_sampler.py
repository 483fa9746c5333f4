"""Deterministic sampling (DESIGN.md §3): stable draws, rates within a derived binomial bound,
per-agent and per-scorer rates, always-sample rules."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from monitor.sampling import Sampler, SamplingDecision, unit_hash
from monitor.settings import SamplingSettings
from monitor.trajectory.model import Run, ToolCall, ToolError

N = 10_000
ALPHA = 1e-9


def ids(n: int = N) -> list[tuple[str, str]]:
    """Sequential ids (the hardest input for a weak hash: they differ in the last digits only)."""
    return [(f"{i:032x}", f"{(i * 0x9E3779B97F4A7C15) % 2**64:016x}") for i in range(n)]


def run(trace_id: str = "0" * 31 + "1", run_id: str = "a" * 16, **kw: Any) -> Run:
    return Run(trace_id=trace_id, run_id=run_id, **kw)


def sampler(**kw: Any) -> Sampler:
    return Sampler(SamplingSettings(**kw))


@cache
def binomial_bound(n: int, p: float, alpha: float) -> int:
    """The smallest k with P(|X − np| > k) ≤ alpha for X ~ Binomial(n, p), from the exact pmf.

    If the hash behaves as a random oracle, the number of ids a rate-p sampler selects among n
    distinct ids is Binomial(n, p); a deviation above k then has probability ≤ alpha. The pmf is
    computed in log space with lgamma (no normal approximation).
    """
    if p in (0.0, 1.0):
        return 0
    lp, lq = math.log(p), math.log1p(-p)
    logs = [
        math.lgamma(n + 1) - math.lgamma(x + 1) - math.lgamma(n - x + 1) + x * lp + (n - x) * lq for x in range(n + 1)
    ]
    pmf = [math.exp(v) for v in logs]
    mean = n * p
    # walk outcomes from the farthest from the mean inwards; the first one that would push the
    # tail mass above alpha must stay inside: k = its (ceiled) deviation
    tail = 0.0
    for dev, q in sorted(((abs(x - mean), q) for x, q in enumerate(pmf)), reverse=True):
        if tail + q > alpha:
            return math.ceil(dev)
        tail += q
    return n


# --------------------------------------------------------------------------- the hash


def test_unit_hash_is_pinned_so_replays_after_an_upgrade_agree() -> None:
    """Golden values: a changed hash would re-select runs on replay and between mixed versions.

    The first is BLAKE2b-64 (person ``monitor-sample``) of the length-prefixed parts,
    ``0x08ecfce561f6c6ac / 2**64``, recomputable with hashlib alone.
    """
    assert unit_hash("", "00000000000000000000000000000001", "aaaaaaaaaaaaaaaa") == 0x08ECFCE561F6C6AC / 2**64
    assert unit_hash("", "00000000000000000000000000000001", "aaaaaaaaaaaaaaaa") == 0.034866147996548504
    assert unit_hash("salt", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "schema_check") == (
        0.3184559961305286
    )


def test_unit_hash_is_in_unit_interval_and_length_prefixed() -> None:
    values = [unit_hash("s", t, r) for t, r in ids(1000)]
    assert all(0.0 <= v < 1.0 for v in values)
    assert unit_hash("ab", "c") != unit_hash("a", "bc")
    assert unit_hash("a", "b") != unit_hash("a", "b", "")


def test_same_decisions_in_other_instances() -> None:
    a = sampler(rate=0.3, salt="x", per_scorer={"judge_x": 0.2})
    b = sampler(rate=0.3, salt="x", per_scorer={"judge_x": 0.2})
    for t, r in ids(2000):
        assert a.should_score(run(t, r)) == b.should_score(run(t, r))
        assert a.scorer_enabled("judge_x", run(t, r), False) == b.scorer_enabled("judge_x", run(t, r), False)


def test_ids_are_case_insensitive() -> None:
    s = sampler(rate=0.5)
    for t, r in ids(500):
        assert s.run_draw(run(t.upper(), r.upper())) == s.run_draw(run(t, r))


_CHILD = """
import json, sys
from monitor.sampling import Sampler
from monitor.settings import SamplingSettings
from monitor.trajectory.model import Run
s = Sampler(SamplingSettings(rate=0.3, salt="x", per_scorer={"judge_x": 0.2}))
out = []
for i in range(2000):
    run = Run(trace_id=f"{i:032x}", run_id=f"{(i * 0x9E3779B97F4A7C15) % 2**64:016x}")
    out.append([s.should_score(run).sampled, s.scorer_enabled("judge_x", run, False), s.run_draw(run)])
json.dump(out, sys.stdout)
"""


@pytest.mark.parametrize("hashseed", ["0", "12345"])
def test_same_decisions_in_other_processes(hashseed: str) -> None:
    """Another interpreter with another PYTHONHASHSEED (a replica, a replay) decides identically."""
    env = {**os.environ, "PYTHONHASHSEED": hashseed}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    theirs = json.loads(out.stdout)
    s = sampler(rate=0.3, salt="x", per_scorer={"judge_x": 0.2})
    ours = [
        [s.should_score(run(t, r)).sampled, s.scorer_enabled("judge_x", run(t, r), False), s.run_draw(run(t, r))]
        for t, r in ids(2000)
    ]
    assert theirs == ours


# --------------------------------------------------------------------------- rates


def test_binomial_bound_is_sane() -> None:
    # normal approximation: z(1 − 5e-10) ≈ 6.1 → 6.1·sqrt(10000·0.1·0.9) ≈ 183
    k = binomial_bound(N, 0.1, ALPHA)
    assert 150 < k < 220
    assert binomial_bound(N, 0.5, ALPHA) > k


@pytest.mark.parametrize("rate", [0.001, 0.01, 0.1, 0.25, 0.5, 0.9, 0.99])
@pytest.mark.parametrize("salt", ["", "replica-salt"])
def test_rate_selects_its_fraction_within_the_binomial_bound(rate: float, salt: str) -> None:
    """14 comparisons at α = 1e-9 each: a random-oracle hash fails any of them with p < 2e-8."""
    s = sampler(rate=rate, salt=salt)
    selected = sum(s.should_score(run(t, r)).sampled for t, r in ids())
    assert abs(selected - N * rate) <= binomial_bound(N, rate, ALPHA), (selected, N * rate)


@pytest.mark.parametrize("rate", [0.05, 0.5])
def test_per_scorer_rate_selects_its_fraction_independently_of_the_run_draw(rate: float) -> None:
    s = sampler(rate=0.5, per_scorer={"judge_x": rate})
    runs = [run(t, r) for t, r in ids()]
    on = [s.scorer_enabled("judge_x", x, False) for x in runs]
    assert abs(sum(on) - N * rate) <= binomial_bound(N, rate, ALPHA)
    # independent of the run draw: among the sampled runs (≈ half) the scorer still takes ≈ rate
    sampled = [x for x, d in zip(runs, on, strict=True) if d and s.should_score(x).sampled]
    joint = 0.5 * rate
    assert abs(len(sampled) - N * joint) <= binomial_bound(N, joint, ALPHA)


def test_raising_a_rate_only_adds_runs() -> None:
    runs = [run(t, r) for t, r in ids(3000)]
    low = {x.trace_id for x in runs if sampler(rate=0.1).should_score(x).sampled}
    high = {x.trace_id for x in runs if sampler(rate=0.3).should_score(x).sampled}
    assert low < high


def test_salt_changes_the_selection_but_not_its_size() -> None:
    runs = [run(t, r) for t, r in ids()]
    a = {x.trace_id for x in runs if sampler(rate=0.2, salt="a").should_score(x).sampled}
    b = {x.trace_id for x in runs if sampler(rate=0.2, salt="b").should_score(x).sampled}
    assert a != b
    # overlap of two independent 20 % samples ≈ 4 %
    assert abs(len(a & b) - N * 0.04) <= binomial_bound(N, 0.04, ALPHA)


def test_rate_extremes() -> None:
    assert all(sampler(rate=1.0).should_score(run(t, r)) == SamplingDecision(True, "rate") for t, r in ids(300))
    assert all(sampler(rate=0.0).should_score(run(t, r)) == SamplingDecision(False, "skipped") for t, r in ids(300))


def test_per_agent_rate_overrides_the_global_rate() -> None:
    s = sampler(rate=0.0, per_agent={"faq": 1.0, "search": 0.0})
    assert s.should_score(run(agent="faq")) == SamplingDecision(True, "agent_rate")
    assert s.should_score(run(agent="search")) == SamplingDecision(False, "skipped")
    assert s.should_score(run(agent="other")) == SamplingDecision(False, "skipped")
    assert s.should_score(run(agent=None)) == SamplingDecision(False, "skipped")
    s = sampler(rate=1.0, per_agent={"search": 0.0})
    assert s.should_score(run(agent="search")).sampled is False
    assert s.should_score(run(agent="faq")) == SamplingDecision(True, "rate")


def test_per_agent_rate_fraction() -> None:
    s = sampler(rate=1.0, per_agent={"a": 0.2})
    got = [s.should_score(run(t, r, agent="a")) for t, r in ids()]
    assert {d.reason for d in got} == {"agent_rate", "skipped"}
    assert abs(sum(d.sampled for d in got) - N * 0.2) <= binomial_bound(N, 0.2, ALPHA)


def test_scorer_enabled_rules() -> None:
    r = run()
    s = sampler(per_scorer={"judge_x": 0.0, "repetition_check": 0.0, "cheap": 1.0})
    assert s.scorer_enabled("schema_check", r, False)  # no rate: always
    assert s.scorer_enabled("cheap", r, False)
    assert not s.scorer_enabled("judge_x", r, False)
    assert s.scorer_enabled("judge_x", r, True)  # flagged → always_if_flagged
    assert not s.scorer_enabled("repetition_check[roll_die]", r, False)  # per-tool instance inherits
    assert s.scorer_rate("repetition_check[roll_die]") == 0.0
    assert s.scorer_rate("schema_check") is None
    off = sampler(per_scorer={"judge_x": 0.0}, always_if_flagged=False)
    assert not off.scorer_enabled("judge_x", r, True)


def test_scorer_draws_differ_between_scorers() -> None:
    s = sampler(per_scorer={"a": 0.5, "b": 0.5})
    runs = [run(t, r) for t, r in ids(2000)]
    assert [s.scorer_enabled("a", x, False) for x in runs] != [s.scorer_enabled("b", x, False) for x in runs]


@pytest.mark.parametrize(
    "bad", [{"per_agent": {"a": 1.5}}, {"per_scorer": {"s": -0.1}}, {"per_scorer": {"s": math.nan}}]
)
def test_rates_outside_unit_interval_are_config_errors(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"not in \[0, 1\]|less than or equal to 1|greater than or equal to 0"):
        sampler(**bad)


# --------------------------------------------------------------------------- always rules


def _call(name: str = "t", **kw: Any) -> ToolCall:
    return ToolCall(index=0, name=name, executed=True, **kw)


@pytest.mark.parametrize(
    "errored",
    [
        run(status="error"),
        run(calls=(_call(error=ToolError("Timeout", "slow")),)),
        run(calls=(_call(result={"isError": True, "content": [{"type": "text", "text": "no"}]}),)),
        run(children=(run(run_id="b" * 16, status="error"),)),
        run(children=(run(run_id="b" * 16, calls=(_call(error=ToolError("E")),)),)),
    ],
    ids=["root_status", "tool_error", "mcp_is_error", "child_status", "child_tool_error"],
)
def test_errored_runs_are_always_sampled(errored: Run) -> None:
    assert sampler(rate=0.0).should_score(errored) == SamplingDecision(True, "errored")
    assert sampler(rate=0.0, per_agent={"x": 0.0}).should_score(errored).reason == "errored"
    assert sampler(rate=0.0, always_if_errored=False).should_score(errored) == SamplingDecision(False, "skipped")


def test_clean_runs_are_not_errored() -> None:
    clean = run(calls=(_call(result={"isError": False}),), children=(run(run_id="b" * 16),))
    assert not Sampler.errored(clean)
    assert sampler(rate=0.0).should_score(clean).sampled is False


def test_attribute_rule() -> None:
    s = sampler(rate=0.0, always_attributes={"monitor.eval.case_id": "canary"})
    hit = run(attributes=(("monitor.eval.case_id", "canary"),))
    miss = run(attributes=(("monitor.eval.case_id", "other"),))
    assert s.should_score(hit) == SamplingDecision(True, "attribute")
    assert s.should_score(miss) == SamplingDecision(False, "skipped")
    assert s.should_score(run()) == SamplingDecision(False, "skipped")


def test_errored_is_checked_before_attributes() -> None:
    s = sampler(rate=0.0, always_attributes={"monitor.eval.case_id": "c"})
    both = run(status="error", attributes=(("monitor.eval.case_id", "c"),))
    assert s.should_score(both).reason == "errored"


def test_resource_attributes_of_rebuilt_runs_match_always_rules() -> None:
    """`deployment.environment` is a resource attribute: the builder keeps it on the run."""
    from monitor.ingest.decode import decode_traces
    from monitor.trajectory.build import build_runs
    from tests.spanutil import Recorder, agent_run

    rec = Recorder(deployment__environment="canary")
    agent_run(rec.tracer(), {"f": lambda: 1}, [("f", {})])
    (run,) = build_runs(decode_traces(rec.record()))
    assert run.attribute("deployment.environment") == "canary"
    decision = sampler(rate=0.0, always_attributes={"deployment.environment": "canary"}).should_score(run)
    assert decision.sampled and decision.reason == "attribute"
