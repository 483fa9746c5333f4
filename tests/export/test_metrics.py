"""The metrics catalogue: names, labels and values after each method, on a fresh registry."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from monitor.export.cardinality import OTHER, UNKNOWN
from monitor.export.metrics import PARAMETER_ERROR_KINDS, SCORE_BUCKETS, TOOL_SELECTION_KINDS, Metrics
from monitor.scoring.result import FailureKind, Issue
from monitor.settings import MetricsSettings
from tests.export.builders import OTHER_ISSUES, PARAMETER_ISSUES, RUN, SELECTION_ISSUES, TRACE, make_run, result


@pytest.fixture
def metrics() -> Metrics:
    return Metrics(MetricsSettings(known_agents=["planner"], known_tools=["search", "fetch"], top_n=2))


def value(m: Metrics, name: str, **labels: str) -> float:
    v = m.registry.get_sample_value(name, labels)
    return 0.0 if v is None else v


# ------------------------------------------------------------------------ catalogue


def test_every_metric_follows_the_naming_rules(metrics: Metrics) -> None:
    names = {f.name for f in metrics.registry.collect() if not f.name.startswith("process_")}
    assert names, "empty catalogue"
    for family in metrics.registry.collect():
        if family.name.startswith("process_"):
            continue
        assert family.name.startswith("monitor_"), family.name
        assert re.fullmatch(r"[a-z_]+", family.name), family.name
        forbidden = {"trace_id", "run_id", "conversation_id", "span_id", "arguments", "session_id", "user"}
        for sample in family.samples:
            assert not forbidden & set(sample.labels), sample
    documented = (Path(__file__).parents[2] / "docs" / "metrics.md").read_text()
    types = {f.name: f.type for f in metrics.registry.collect()}
    for name in names:
        full = name + {"counter": "_total", "info": "_info"}.get(types[name], "")
        assert f"`{full}`" in documented, f"{full} missing from docs/metrics.md"
    documented_names = set(re.findall(r"^\| `(monitor_[a-z_]+)`", documented, re.M))
    exported = {n + {"counter": "_total", "info": "_info"}.get(types[n], "") for n in names}
    assert documented_names == exported


def test_default_registry_is_fresh_never_the_global_one() -> None:
    from prometheus_client import REGISTRY

    a = Metrics(MetricsSettings())
    b = Metrics(MetricsSettings())
    assert a.registry is not REGISTRY and a.registry is not b.registry
    reg = CollectorRegistry()
    assert Metrics(MetricsSettings(), reg).registry is reg


def test_build_info(metrics: Metrics) -> None:
    samples = [s for f in metrics.registry.collect() if f.name == "monitor_build" for s in f.samples]
    assert len(samples) == 1 and samples[0].value == 1
    assert samples[0].labels["version"] and samples[0].labels["python"]


# ------------------------------------------------------------------------ pipeline


def test_pipeline_counters_and_gauges(metrics: Metrics) -> None:
    m = metrics
    m.records_consumed("otlp_spans", 0, 5)
    m.records_consumed("otlp_spans", 1)
    m.spans_decoded(42)
    m.record_invalid("not_protobuf")
    m.record_dead_lettered("not_protobuf")
    m.traces_closed("complete", 3)
    m.traces_closed("max_age")
    m.late_spans(2)
    m.split_traces(1)
    m.commit_done("otlp_spans", 0, 1_700_000_000.5)
    m.set_lag("otlp_spans", 0, 17)
    m.paused(True, "store_unavailable")
    m.store_write("new", 4)
    m.store_write("duplicate")
    m.runs_sampled("sampled", 3)
    m.runs_sampled("skipped")
    m.set_open_traces(7, 123, 4.5)

    assert value(m, "monitor_records_consumed_total", topic="otlp_spans", partition="0") == 5
    assert value(m, "monitor_records_consumed_total", topic="otlp_spans", partition="1") == 1
    assert value(m, "monitor_spans_decoded_total") == 42
    assert value(m, "monitor_records_invalid_total", reason="not_protobuf") == 1
    assert value(m, "monitor_records_dead_lettered_total", reason="not_protobuf") == 1
    assert value(m, "monitor_traces_closed_total", outcome="complete") == 3
    assert value(m, "monitor_traces_closed_total", outcome="max_age") == 1
    assert m.registry.get_sample_value("monitor_traces_closed_total", {"outcome": "shutdown"}) == 0  # pre-created
    assert value(m, "monitor_late_spans_total") == 2
    assert value(m, "monitor_split_traces_total") == 1
    assert value(m, "monitor_last_commit_timestamp_seconds", topic="otlp_spans", partition="0") == 1_700_000_000.5
    assert value(m, "monitor_consumer_lag_records", topic="otlp_spans", partition="0") == 17
    assert value(m, "monitor_consumer_paused", reason="store_unavailable") == 1
    m.paused(False, "store_unavailable")
    assert m.registry.get_sample_value("monitor_consumer_paused", {"reason": "store_unavailable"}) == 0
    assert value(m, "monitor_store_writes_total", outcome="new") == 4
    assert value(m, "monitor_store_writes_total", outcome="duplicate") == 1
    assert m.registry.get_sample_value("monitor_store_writes_total", {"outcome": "error"}) == 0
    assert value(m, "monitor_runs_sampled_total", decision="sampled") == 3
    assert value(m, "monitor_runs_sampled_total", decision="skipped") == 1
    assert value(m, "monitor_traces_open") == 7
    assert value(m, "monitor_spans_open") == 123
    assert value(m, "monitor_oldest_open_trace_age_seconds") == 4.5

    m.forget_partition("otlp_spans", 0)
    assert (
        m.registry.get_sample_value("monitor_consumer_lag_records", {"topic": "otlp_spans", "partition": "0"}) is None
    )


def test_open_ended_reason_codes_are_capped(metrics: Metrics) -> None:
    for i in range(100):
        metrics.record_invalid(f"reason_{i}")
    reasons = {
        s.labels["reason"]
        for f in metrics.registry.collect()
        if f.name == "monitor_records_invalid"
        for s in f.samples
        if s.name.endswith("_total")
    }
    assert len(reasons) == 33 and OTHER in reasons
    assert value(metrics, "monitor_records_invalid_total", reason=OTHER) == 68


# ------------------------------------------------------------------------ quality


def test_observe_results_counts_runs_calls_errors_scores(metrics: Metrics) -> None:
    m = metrics
    run = make_run()
    issues = SELECTION_ISSUES + PARAMETER_ISSUES + OTHER_ISSUES
    m.observe_results(
        run,
        [
            result(run, "tool_selection", 0.25, False, issues),
            result(run, "tool_args", 1.0, True),
            result(run, "judge_goal", status="not_applicable"),
        ],
    )
    assert value(m, "monitor_runs_scored_total", agent="planner") == 1
    assert value(m, "monitor_tool_calls_total", agent="planner", tool="search") == 2
    assert value(m, "monitor_tool_calls_total", agent="planner", tool="fetch") == 1

    sel = "monitor_tool_selection_errors_total"
    assert value(m, sel, kind="wrong_tool", agent="planner", tool="fetch") == 1
    # unknown tools take the free top-N slots (top_n=2), a third would fold into "other"
    assert value(m, sel, kind="missing_tool", agent="planner", tool="get_forecast") == 1
    assert value(m, sel, kind="hallucinated_tool", agent="planner", tool="get_weather_v2") == 1
    par = "monitor_parameter_errors_total"
    assert value(m, par, kind="missing_parameter", agent="planner", tool="search") == 1
    assert value(m, par, kind="wrong_type", agent="planner", tool="search") == 1
    fp = "monitor_failure_patterns_total"
    assert value(m, fp, kind="goal_not_met", agent="planner", tool="none") == 1
    assert value(m, fp, kind="wrong_tool", agent="planner", tool="fetch") == 1
    assert value(m, fp, kind="missing_parameter", agent="planner", tool="search") == 1
    # info-severity issues (notes, warnings-as-info) are not failures
    assert value(m, fp, kind="tool_latency", agent="planner", tool="fetch") == 0
    assert value(m, fp, kind="tool_schema_invalid", agent="planner", tool="search") == 0
    # parameter and selection kinds never cross
    assert value(m, sel, kind="missing_parameter", agent="planner", tool="search") == 0
    assert value(m, par, kind="goal_not_met", agent="planner", tool="none") == 0

    sr = "monitor_scorer_results_total"
    assert value(m, sr, scorer="tool_selection", status="scored", passed="false") == 1
    assert value(m, sr, scorer="tool_args", status="scored", passed="true") == 1
    assert value(m, sr, scorer="judge_goal", status="not_applicable", passed="none") == 1

    assert value(m, "monitor_score_ratio_count", scorer="tool_selection") == 1
    assert value(m, "monitor_score_ratio_sum", scorer="tool_selection") == 0.25
    assert value(m, "monitor_score_ratio_bucket", scorer="tool_selection", le="0.2") == 0
    assert value(m, "monitor_score_ratio_bucket", scorer="tool_selection", le="0.3") == 1
    assert value(m, "monitor_score_ratio_bucket", scorer="tool_args", le="0.95") == 0
    assert value(m, "monitor_score_ratio_bucket", scorer="tool_args", le="1.0") == 1
    assert value(m, "monitor_score_ratio_count", scorer="judge_goal") == 0


def test_every_selection_and_parameter_kind_lands_in_its_metric(metrics: Metrics) -> None:
    run = make_run()
    issues = tuple(Issue(k, tool="search", call_index=0) for k in FailureKind)
    metrics.observe_results(run, [result(run, issues=issues)])
    for kind in FailureKind:
        sel = value(metrics, "monitor_tool_selection_errors_total", kind=kind, agent="planner", tool="search")
        par = value(metrics, "monitor_parameter_errors_total", kind=kind, agent="planner", tool="search")
        fp = value(metrics, "monitor_failure_patterns_total", kind=kind, agent="planner", tool="search")
        assert (sel, par, fp) == (float(kind in TOOL_SELECTION_KINDS), float(kind in PARAMETER_ERROR_KINDS), 1.0)
    assert {str(k) for k in TOOL_SELECTION_KINDS} == {
        "wrong_tool", "missing_tool", "unnecessary_tool", "hallucinated_tool", "forbidden_tool", "wrong_order",
    }  # fmt: skip
    assert {str(k) for k in PARAMETER_ERROR_KINDS} == {
        "missing_parameter", "unknown_parameter", "wrong_type", "enum_violation", "invalid_value", "wrong_value",
        "forbidden_parameter", "malformed_arguments",
    }  # fmt: skip


def test_the_same_finding_from_two_scorers_counts_once(metrics: Metrics) -> None:
    run = make_run()
    same = Issue(FailureKind.WRONG_TOOL, tool="fetch", call_index=1)
    metrics.observe_results(run, [result(run, "a", issues=(same,)), result(run, "b", issues=(same,))])
    assert value(metrics, "monitor_tool_selection_errors_total", kind="wrong_tool", agent="planner", tool="fetch") == 1
    assert value(metrics, "monitor_runs_scored_total", agent="planner") == 1


def test_empty_results_count_nothing(metrics: Metrics) -> None:
    metrics.observe_results(make_run(), [])
    assert value(metrics, "monitor_runs_scored_total", agent="planner") == 0
    assert value(metrics, "monitor_tool_calls_total", agent="planner", tool="search") == 0


def test_agent_and_tool_labels_go_through_the_guard(metrics: Metrics) -> None:
    # known: planner / search, fetch; top_n=2 admits the first two unknown names of each
    for i, agent in enumerate(["a1", "a2", "a3", None]):
        run = make_run(agent=agent, tools=("search", f"t{i}"), run_id=f"{i:016x}")
        metrics.observe_results(run, [result(run)])
    agents = {"a1", "a2", OTHER, UNKNOWN}
    for a in agents:
        assert value(metrics, "monitor_runs_scored_total", agent=a) == 1, a
    assert value(metrics, "monitor_tool_calls_total", agent="a1", tool="t0") == 1
    assert value(metrics, "monitor_tool_calls_total", agent="a2", tool="t1") == 1
    assert value(metrics, "monitor_tool_calls_total", agent=OTHER, tool=OTHER) == 1
    assert value(metrics, "monitor_tool_calls_total", agent=UNKNOWN, tool=OTHER) == 1
    # each name is resolved once per run: a3's run folds once, t2 and t3 once each
    assert value(metrics, "monitor_label_values_folded_total", label="agent") == 1
    assert value(metrics, "monitor_label_values_folded_total", label="tool") == 2
    assert metrics.agents.count("a1") == 1


def test_eviction_removes_the_series_of_the_evicted_name() -> None:
    m = Metrics(MetricsSettings(top_n=1))
    rare = make_run(agent="rare", tools=())
    m.observe_results(rare, [result(rare)])
    assert value(m, "monitor_runs_scored_total", agent="rare") == 1
    busy = make_run(agent="busy", tools=())
    for _ in range(3):
        m.observe_results(busy, [result(busy)])
    labels = {
        s.labels["agent"] for s in m.registry.collect() for s in s.samples if s.name == "monitor_runs_scored_total"
    }
    assert labels == {"busy", OTHER}  # "rare" was evicted with its series
    assert value(m, "monitor_runs_scored_total", agent="busy") == 1  # counted from its admission on
    assert value(m, "monitor_runs_scored_total", agent=OTHER) == 2  # the two runs before it
    assert m.agents.admitted == {"busy"}


def test_nested_runs_count_by_their_own_agent(metrics: Metrics) -> None:
    child = make_run(agent="researcher", tools=("fetch",), run_id="c" * 16)
    root = make_run(agent="planner", tools=("search",), children=(child,))
    # child scored on its own
    metrics.observe_results(root, [result(root), result(child)])
    assert value(metrics, "monitor_runs_scored_total", agent="planner") == 1
    assert value(metrics, "monitor_runs_scored_total", agent="researcher") == 1
    assert value(metrics, "monitor_tool_calls_total", agent="researcher", tool="fetch") == 1
    assert value(metrics, "monitor_tool_calls_total", agent="planner", tool="search") == 1
    # child not scored on its own: its calls still count (once), no run counted for it
    other_child = make_run(agent="researcher", tools=("fetch",), run_id="d" * 16, trace_id="e" * 32)
    root2 = make_run(agent="planner", tools=(), children=(other_child,), trace_id="e" * 32, run_id="f" * 16)
    metrics.observe_results(root2, [result(root2)])
    assert value(metrics, "monitor_runs_scored_total", agent="researcher") == 1
    assert value(metrics, "monitor_tool_calls_total", agent="researcher", tool="fetch") == 2


def test_result_without_matching_run_id_belongs_to_the_root(metrics: Metrics) -> None:
    run = make_run()
    stray = result(run).__class__(scorer="x", scorer_kind="code", scorer_version=1, status="error", reason="internal")
    metrics.observe_results(run, [stray])
    assert value(metrics, "monitor_runs_scored_total", agent="planner") == 1
    assert value(metrics, "monitor_scorer_results_total", scorer="x", status="error", passed="none") == 1


# ------------------------------------------------------------------------ exemplars


def test_trace_ids_ride_as_exemplars_in_openmetrics_only(metrics: Metrics) -> None:
    run = make_run()
    metrics.observe_results(run, [result(run, score=0.25, issues=SELECTION_ISSUES + PARAMETER_ISSUES)])
    text = generate_openmetrics(metrics.registry).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    want = {"trace_id": TRACE, "run_id": RUN}

    def exemplars(family: str) -> list[dict[str, str]]:
        return [dict(s.exemplar.labels) for s in families[family].samples if s.exemplar is not None]

    for family in (
        "monitor_runs_scored",
        "monitor_tool_calls",
        "monitor_tool_selection_errors",
        "monitor_parameter_errors",
        "monitor_failure_patterns",
        "monitor_scorer_results",
        "monitor_score_ratio",
    ):
        found = exemplars(family)
        assert found and all(e == want for e in found), (family, found)
    bucket = [s for s in families["monitor_score_ratio"].samples if s.exemplar is not None]
    assert bucket[0].labels["le"] == "0.3" and bucket[0].exemplar.value == 0.25

    classic = generate_latest(metrics.registry).decode()
    assert TRACE not in classic
    assert "trace_id" not in classic


def test_long_ids_shrink_the_exemplar_to_fit_the_limit(metrics: Metrics) -> None:
    run = make_run(trace_id="t" * 100, run_id="r" * 40)
    metrics.observe_results(run, [result(run)])
    text = generate_openmetrics(metrics.registry).decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    ex = [s.exemplar for s in families["monitor_runs_scored"].samples if s.exemplar is not None]
    assert ex and dict(ex[0].labels) == {"trace_id": "t" * 100}


def test_score_buckets_cover_the_unit_interval() -> None:
    assert SCORE_BUCKETS[0] == 0.0 and SCORE_BUCKETS[-1] == 1.0
    assert list(SCORE_BUCKETS) == sorted(SCORE_BUCKETS)
