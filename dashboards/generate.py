"""Grafana dashboards of agent-tool-monitor, generated with Grafana's ``grafana-foundation-sdk``.

    python dashboards/generate.py            # (re)write dashboards/*.json
    python dashboards/generate.py --check    # exit 1, with a diff, when a checked-in file differs

Three dashboards, all on the Prometheus metrics of ``monitor/export/metrics.py`` (docs/metrics.md):

* ``overview.json``  runs, pass rates, error ratios by kind, tool-selection errors, judge spend and budget;
* ``agent.json``     one agent: tools, tool-selection error kinds by tool, parameter errors by tool, latency-budget
  breaches, score distributions per scorer;
* ``pipeline.json``  consumer lag, commit age, pauses by reason, record-to-result latency, unrecognized spans,
  dead letters, store, open traces, judge backlog and requests.

Every dashboard has a ``datasource`` variable (any Prometheus data source); the quality dashboards add ``agent``
and ``tool`` (``label_values`` queries), the pipeline one ``instance``. Targets built from the metrics that
carry a ``trace_id`` exemplar (:data:`EXEMPLAR_METRICS`) have exemplars turned on, so with the data source's
``exemplarTraceIdDestinations`` set (dashboards/README.md) a point links to its trace.

The failure kinds come from :mod:`monitor.export.metrics`, so a kind added there shows up here on the next
generation (and ``--check`` in CI says the JSON must be regenerated).
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Final

from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.builders import heatmap as heatmap_b
from grafana_foundation_sdk.builders import prometheus as prom_b
from grafana_foundation_sdk.builders import stat as stat_b
from grafana_foundation_sdk.builders import table as table_b
from grafana_foundation_sdk.builders import timeseries as ts_b
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as dash
from grafana_foundation_sdk.models import heatmap as heatmap_m
from grafana_foundation_sdk.models import prometheus as prom

from monitor.export.metrics import PARAMETER_ERROR_KINDS, TOOL_SELECTION_KINDS

HERE: Final = Path(__file__).resolve().parent
TAG: Final = "agent-tool-monitor"
DS: Final = dash.DataSourceRef(type_val="prometheus", uid="${datasource}")
"""Every panel and query variable uses the dashboard's ``datasource`` variable."""

RATE: Final = "$__rate_interval"
RANGE: Final = "$__range"

EXEMPLAR_METRICS: Final = frozenset(
    {
        "monitor_runs_scored_total",
        "monitor_tool_calls_total",
        "monitor_tool_selection_errors_total",
        "monitor_parameter_errors_total",
        "monitor_failure_patterns_total",
        "monitor_scorer_results_total",
        "monitor_score_ratio_bucket",
    }
)
"""Samples the daemon attaches a ``trace_id`` (and ``run_id``) exemplar to (OpenMetrics exposition only)."""

LATENCY_KINDS: Final = ("tool_latency", "run_latency")


def _alternation(kinds: Iterable[str]) -> str:
    return "|".join(sorted(str(k) for k in kinds))


SELECTION_KINDS_RE: Final = _alternation(TOOL_SELECTION_KINDS)
PARAMETER_KINDS_RE: Final = _alternation(PARAMETER_ERROR_KINDS)
OTHER_KINDS_EXCLUDED_RE: Final = _alternation([*TOOL_SELECTION_KINDS, *PARAMETER_ERROR_KINDS, *LATENCY_KINDS])


# ---------------------------------------------------------------------------------------------------------- queries


def uses_exemplars(expr: str) -> bool:
    """True when ``expr`` reads a metric that carries exemplars (whole-word match of the sample name)."""
    return any(f"{name}{{" in expr or f"{name}[" in expr for name in EXEMPLAR_METRICS)


def q(expr: str, legend: str = "", ref: str = "A") -> prom_b.Dataquery:
    """A range query for a graph; exemplars on when the expression reads an exemplar-carrying metric."""
    target = prom_b.Dataquery().expr(expr).ref_id(ref).datasource(DS).range()
    if legend:
        target = target.legend_format(legend)
    if uses_exemplars(expr):
        target = target.exemplar(True)
    return target


def rate_by(metric: str, label: str, selector: str) -> prom_b.Dataquery:
    """The per-second rate of counter ``metric`` (``selector`` filters it), one series per value of ``label``."""
    return q(f"sum by ({label}) (rate({metric}{{{selector}}}[{RATE}]))", f"{{{{{label}}}}}")


def instant(expr: str, ref: str = "A", *, table: bool = False) -> prom_b.Dataquery:
    """An instant query (stat and table panels: one value per series, no exemplars)."""
    target = prom_b.Dataquery().expr(expr).ref_id(ref).datasource(DS).instant()
    if table:
        target = target.format(prom.PromQueryFormat.TABLE)
    return target


def ratio(numerator: str, denominator: str) -> str:
    """``numerator / denominator`` where a series of the denominator without a numerator counts as 0 (a tool
    with calls and no errors shows 0, not a gap). Both sides must be grouped by the same labels."""
    return f"({numerator} or {denominator} * 0) / {denominator}"


# ---------------------------------------------------------------------------------------------------------- panels


def _legend(table: bool = False) -> common_b.VizLegendOptions:
    legend = common_b.VizLegendOptions().show_legend(True).placement(common.LegendPlacement.BOTTOM)
    if table:
        return legend.display_mode(common.LegendDisplayMode.TABLE).calcs(["mean", "max", "lastNotNull"])
    return legend.display_mode(common.LegendDisplayMode.LIST)


def timeseries(
    title: str,
    description: str,
    targets: list[prom_b.Dataquery],
    *,
    unit: str = "short",
    stack: bool = False,
    min_val: float | None = 0,
    max_val: float | None = None,
    table_legend: bool = False,
    w: int = 12,
    h: int = 8,
) -> ts_b.Panel:
    panel = (
        ts_b.Panel()
        .title(title)
        .description(description)
        .datasource(DS)
        .unit(unit)
        .span(w)
        .height(h)
        .line_width(1)
        .fill_opacity(10)
        .show_points(common.VisibilityMode.NEVER)
        .legend(_legend(table_legend))
        .tooltip(common_b.VizTooltipOptions().mode(common.TooltipDisplayMode.MULTI).sort(common.SortOrder.DESCENDING))
    )
    if stack:
        panel = panel.stacking(common_b.StackingConfig().mode(common.StackingMode.NORMAL))
    if min_val is not None:
        panel = panel.min(min_val)
    if max_val is not None:
        panel = panel.max(max_val)
    for target in targets:
        panel = panel.with_target(target)
    return panel


def stat(
    title: str,
    description: str,
    expr: str,
    *,
    unit: str = "short",
    decimals: float | None = None,
    thresholds: list[tuple[float | None, str]] | None = None,
    mappings: list[dash.ValueMapping] | None = None,
    w: int = 4,
    h: int = 4,
) -> stat_b.Panel:
    steps = thresholds or [(None, "text")]
    panel = (
        stat_b.Panel()
        .title(title)
        .description(description)
        .datasource(DS)
        .unit(unit)
        .span(w)
        .height(h)
        .graph_mode(common.BigValueGraphMode.NONE)
        .color_mode(common.BigValueColorMode.VALUE)
        .reduce_options(common_b.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
        .thresholds(
            dash_b.ThresholdsConfig()
            .mode(dash.ThresholdsMode.ABSOLUTE)
            .steps([dash.Threshold(value=v, color=c) for v, c in steps])
        )
        .with_target(instant(expr))
    )
    if decimals is not None:
        panel = panel.decimals(decimals)
    if mappings:
        panel = panel.mappings(mappings)
    return panel


def table(title: str, description: str, expr: str, *, w: int = 12, h: int = 8) -> table_b.Panel:
    """A table of an instant query, one row per series (labels as columns, the value last)."""
    return (
        table_b.Panel()
        .title(title)
        .description(description)
        .datasource(DS)
        .span(w)
        .height(h)
        .show_header(True)
        .sort_by([common_b.TableSortByFieldState().display_name("Value").desc(True)])
        .with_target(instant(expr, table=True))
        .with_transformation(dash.DataTransformerConfig(id_val="organize", options={"excludeByName": {"Time": True}}))
    )


def score_heatmap(title: str, description: str, expr: str, *, repeat: str, w: int = 8, h: int = 8) -> heatmap_b.Panel:
    """Buckets of a Prometheus histogram as a heatmap (Grafana does not re-bucket: ``calculate`` off)."""
    target = q(expr, "{{le}}").format(prom.PromQueryFormat.HEATMAP)
    return (
        heatmap_b.Panel()
        .title(title)
        .description(description)
        .datasource(DS)
        .span(w)
        .height(h)
        .repeat(repeat)
        .repeat_direction("h")
        .calculate(False)
        .color(heatmap_b.HeatmapColorOptions().mode(heatmap_m.HeatmapColorMode.SCHEME).scheme("Oranges").steps(64))
        .y_axis(heatmap_b.YAxisConfig().unit("percentunit").decimals(2))
        .cell_values(heatmap_b.CellValues().unit("short"))
        .scale_distribution(common_b.ScaleDistributionConfig().type(common.ScaleDistribution.LINEAR))
        .show_tooltip()
        .show_legend()
        .exemplars_color("rgba(255,0,255,0.7)")
        .with_target(target)
    )


# ---------------------------------------------------------------------------------------------------------- variables


def datasource_variable() -> dash_b.DatasourceVariable:
    return (
        dash_b.DatasourceVariable("datasource")
        .label("Data source")
        .description("The Prometheus that scrapes the monitor daemons.")
        .type("prometheus")
    )


def query_variable(name: str, label: str, query: str, description: str, *, multi: bool = True) -> dash_b.QueryVariable:
    """A ``label_values`` variable; ``multi`` adds an ``All`` option matching every value (``.*``)."""
    variable = (
        dash_b.QueryVariable(name)
        .label(label)
        .description(description)
        .datasource(DS)
        .query(query)
        .refresh(dash.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(dash.VariableSort.ALPHABETICAL_CASE_INSENSITIVE_ASC)
    )
    if multi:
        variable = variable.multi(True).include_all(True).all_value(".*")
    return variable


# ---------------------------------------------------------------------------------------------------------- board


class Board:
    """A dashboard builder that numbers panels (unique ids across rows) and lays rows out with the SDK."""

    def __init__(self, uid: str, title: str, description: str, variables: list[Any]) -> None:
        self.builder = (
            dash_b.Dashboard(title)
            .uid(uid)
            .description(description)
            .tags([TAG])
            .editable()
            .tooltip(dash.DashboardCursorSync.CROSSHAIR)
            .time("now-6h", "now")
            .refresh("1m")
            .timezone("browser")
            .link(
                dash_b.DashboardLink("Agent tool monitor")
                .type(dash.DashboardLinkType.DASHBOARDS)
                .tags([TAG])
                .as_dropdown(True)
                .include_vars(True)
                .keep_time(True)
            )
        )
        for variable in variables:
            self.builder = self.builder.with_variable(variable)
        self._next_id = 1

    def _id(self) -> int:
        n = self._next_id
        self._next_id += 1
        return n

    def row(self, title: str, *panels: Any) -> Board:
        """A row, then its panels (each line of panels must add up to 24 columns)."""
        self.builder = self.builder.with_row(dash_b.Row(title).id(self._id()))
        for panel in panels:
            self.builder = self.builder.with_panel(panel.id(self._id()))
        return self

    def json(self) -> dict[str, Any]:
        encoded: dict[str, Any] = json.loads(json.dumps(self.builder.build(), cls=JSONEncoder))
        return encoded


# ---------------------------------------------------------------------------------------------------------- overview


def overview() -> dict[str, Any]:
    a = 'agent=~"$agent"'
    at = 'agent=~"$agent",tool=~"$tool"'
    runs = f"sum(rate(monitor_runs_scored_total{{{a}}}[{RATE}]))"
    scored = 'status="scored"'
    passed = 'status="scored",passed="true"'
    board = Board(
        "atm-overview",
        "Agent tool monitor / Overview",
        "Runs scored, pass rates, failure ratios by kind, tool-selection errors, judge spend and budget.",
        [
            datasource_variable(),
            query_variable(
                "agent",
                "Agent",
                "label_values(monitor_runs_scored_total, agent)",
                "Agents with scored runs (names past metrics.top_n are folded into 'other').",
            ),
            query_variable(
                "tool",
                "Tool",
                'label_values(monitor_tool_calls_total{agent=~"$agent"}, tool)',
                "Tools the selected agents called; 'All' also matches issues without a tool (tool=\"none\").",
            ),
        ],
    )
    board.row(
        "Summary (selected time range)",
        stat(
            "Runs scored",
            "Runs with at least one new scorer result in the time range.",
            f"sum(increase(monitor_runs_scored_total{{{a}}}[{RANGE}]))",
            decimals=0,
        ),
        stat(
            "Pass rate",
            "Share of scored results that passed, over every scorer (scorer results carry no agent label).",
            f"sum(increase(monitor_scorer_results_total{{{passed}}}[{RANGE}]))"
            f" / sum(increase(monitor_scorer_results_total{{{scored}}}[{RANGE}]))",
            unit="percentunit",
            thresholds=[(None, "red"), (0.8, "orange"), (0.95, "green")],
        ),
        stat(
            "Tool-selection errors per call",
            "Tool-selection errors (wrong, missing, unnecessary, hallucinated, forbidden tool; wrong order) per tool "
            "call of the selected agents and tools.",
            f"(sum(increase(monitor_tool_selection_errors_total{{{at}}}[{RANGE}])) or vector(0))"
            f" / sum(increase(monitor_tool_calls_total{{{at}}}[{RANGE}]))",
            unit="percentunit",
            thresholds=[(None, "green"), (0.05, "orange"), (0.1, "red")],
        ),
        stat(
            "Parameter errors per call",
            "Tool-parameter errors (missing, unknown, wrong type, invalid value, …) per tool call.",
            f"(sum(increase(monitor_parameter_errors_total{{{at}}}[{RANGE}])) or vector(0))"
            f" / sum(increase(monitor_tool_calls_total{{{at}}}[{RANGE}]))",
            unit="percentunit",
            thresholds=[(None, "green"), (0.05, "orange"), (0.1, "red")],
        ),
        stat(
            "Judge spend",
            "USD spent on LLM judge requests in the time range (priced with judge.prices).",
            f"sum(increase(monitor_judge_cost_usd_total[{RANGE}]))",
            unit="currencyUSD",
            decimals=2,
        ),
        stat(
            "Judge budget left today",
            "Smallest USD amount a judge budget (total or per judge kind, judge.budgets.*.usd_per_day) still allows "
            "today. At 0 the judges of that scope stop until the next UTC day.",
            'min(monitor_judge_budget_remaining{limit="usd_per_day"})',
            unit="currencyUSD",
            decimals=2,
            thresholds=[(None, "red"), (0.01, "orange"), (1, "green")],
        ),
    )
    board.row(
        "Runs and pass rates",
        timeseries(
            "Runs scored per second, by agent",
            "Runs with at least one new scorer result. Exemplars link to example traces.",
            [rate_by("monitor_runs_scored_total", "agent", a)],
            stack=True,
        ),
        timeseries(
            "Pass rate by scorer",
            "Share of each scorer's scored results that passed (all agents: scorer results carry no agent label).",
            [
                q(
                    ratio(
                        f"sum by (scorer) (rate(monitor_scorer_results_total{{{passed}}}[{RATE}]))",
                        f"sum by (scorer) (rate(monitor_scorer_results_total{{{scored}}}[{RATE}]))",
                    ),
                    "{{scorer}}",
                )
            ],
            unit="percentunit",
            max_val=1,
            table_legend=True,
        ),
    )
    board.row(
        "Failures",
        timeseries(
            "Failures per scored run, by kind",
            "Failures of every kind of the taxonomy (each finding counted once per run) divided by the runs scored: "
            "the error ratio of each kind.",
            [
                q(
                    f"sum by (kind) (rate(monitor_failure_patterns_total{{{at}}}[{RATE}]))"
                    f" / ignoring (kind) group_left () {runs}",
                    "{{kind}}",
                )
            ],
            unit="percentunit",
            table_legend=True,
        ),
        timeseries(
            "Tool-selection errors per second, by kind",
            "wrong_tool, missing_tool, unnecessary_tool, hallucinated_tool, forbidden_tool, wrong_order.",
            [rate_by("monitor_tool_selection_errors_total", "kind", at)],
            stack=True,
        ),
        timeseries(
            "Tool-selection errors per call, by agent",
            "Tool-selection errors divided by tool calls, per agent (the ratio the alerts page on).",
            [
                q(
                    ratio(
                        f"sum by (agent) (rate(monitor_tool_selection_errors_total{{{at}}}[{RATE}]))",
                        f"sum by (agent) (rate(monitor_tool_calls_total{{{at}}}[{RATE}]))",
                    ),
                    "{{agent}}",
                )
            ],
            unit="percentunit",
        ),
        timeseries(
            "Parameter errors per second, by kind",
            "missing_parameter, unknown_parameter, wrong_type, enum_violation, invalid_value, wrong_value, "
            "forbidden_parameter, malformed_arguments.",
            [rate_by("monitor_parameter_errors_total", "kind", at)],
            stack=True,
        ),
        table(
            "Top tool-selection errors",
            "Agent, tool and kind with the most tool-selection errors in the time range.",
            f"topk(20, sum by (agent, tool, kind) (increase(monitor_tool_selection_errors_total{{{at}}}[{RANGE}])))",
        ),
        table(
            "Top parameter errors",
            "Agent, tool and kind with the most parameter errors in the time range.",
            f"topk(20, sum by (agent, tool, kind) (increase(monitor_parameter_errors_total{{{at}}}[{RANGE}])))",
        ),
    )
    board.row(
        "Judges",
        timeseries(
            "Judge spend (USD per hour), by judge and model",
            "Rate of judge spend, priced with judge.prices.",
            [
                q(
                    f"sum by (judge, model) (rate(monitor_judge_cost_usd_total[{RATE}])) * 3600",
                    "{{judge}} · {{model}}",
                )
            ],
            unit="currencyUSD",
            stack=True,
            w=8,
        ),
        timeseries(
            "Judge budget left today (USD)",
            "What each USD budget (scope total or a judge kind) still allows today.",
            [q('min by (scope) (monitor_judge_budget_remaining{limit="usd_per_day"})', "{{scope}}")],
            unit="currencyUSD",
            w=8,
        ),
        timeseries(
            "Judge budget left (requests, tokens)",
            "Requests per minute and tokens per day each budget still allows (configured limits only).",
            [
                q(
                    'min by (scope, limit) (monitor_judge_budget_remaining{limit!="usd_per_day"})',
                    "{{scope}} · {{limit}}",
                )
            ],
            w=8,
        ),
    )
    return board.json()


# ---------------------------------------------------------------------------------------------------------- agent


def agent() -> dict[str, Any]:
    a = 'agent="$agent"'
    at = 'agent="$agent",tool=~"$tool"'
    runs = f"sum(rate(monitor_runs_scored_total{{{a}}}[{RATE}]))"
    board = Board(
        "atm-agent",
        "Agent tool monitor / Agent",
        "One agent: its tools, tool-selection and parameter errors by tool, latency-budget breaches, scores.",
        [
            datasource_variable(),
            query_variable(
                "agent",
                "Agent",
                "label_values(monitor_runs_scored_total, agent)",
                "The agent to drill into.",
                multi=False,
            ),
            query_variable(
                "tool",
                "Tool",
                'label_values(monitor_tool_calls_total{agent="$agent"}, tool)',
                "Tools of the agent; 'All' also matches issues without a tool (tool=\"none\").",
            ),
            query_variable(
                "scorer",
                "Scorer",
                "label_values(monitor_score_ratio_bucket, scorer)",
                "Scorers whose score distributions to show (one heatmap each).",
            ),
        ],
    )
    board.row(
        "Activity (selected time range)",
        stat(
            "Runs scored",
            "Runs of the agent with at least one new scorer result.",
            f"sum(increase(monitor_runs_scored_total{{{a}}}[{RANGE}]))",
            decimals=0,
            w=6,
        ),
        stat(
            "Tool calls",
            "Tool calls of the agent's scored runs (selected tools).",
            f"sum(increase(monitor_tool_calls_total{{{at}}}[{RANGE}]))",
            decimals=0,
            w=6,
        ),
        stat(
            "Tool-selection errors per call",
            "Tool-selection errors per tool call (selected tools).",
            f"(sum(increase(monitor_tool_selection_errors_total{{{at}}}[{RANGE}])) or vector(0))"
            f" / sum(increase(monitor_tool_calls_total{{{at}}}[{RANGE}]))",
            unit="percentunit",
            thresholds=[(None, "green"), (0.05, "orange"), (0.1, "red")],
            w=6,
        ),
        stat(
            "Parameter errors per call",
            "Tool-parameter errors per tool call (selected tools).",
            f"(sum(increase(monitor_parameter_errors_total{{{at}}}[{RANGE}])) or vector(0))"
            f" / sum(increase(monitor_tool_calls_total{{{at}}}[{RANGE}]))",
            unit="percentunit",
            thresholds=[(None, "green"), (0.05, "orange"), (0.1, "red")],
            w=6,
        ),
    )
    board.row(
        "Tools",
        timeseries(
            "Tool calls per second, by tool",
            "Calls of each tool in the agent's scored runs. Exemplars link to example traces.",
            [rate_by("monitor_tool_calls_total", "tool", at)],
            stack=True,
        ),
        timeseries(
            "Calls per run, by tool",
            "Average calls of each tool per scored run of the agent.",
            [
                q(
                    f"sum by (tool) (rate(monitor_tool_calls_total{{{at}}}[{RATE}])) / ignoring (tool) group_left () "
                    f"{runs}",
                    "{{tool}}",
                )
            ],
        ),
    )
    board.row(
        "Tool selection",
        timeseries(
            "Tool-selection errors per second, by tool and kind",
            "Which tool each wrong-tool kind concerns: for missing_tool the tool that should have been called, for "
            "hallucinated_tool the name the model made up, for forbidden_tool the tool it must not call.",
            [
                q(
                    f"sum by (tool, kind) (rate(monitor_tool_selection_errors_total{{{at}}}[{RATE}]))",
                    "{{tool}} · {{kind}}",
                )
            ],
            stack=True,
            table_legend=True,
        ),
        timeseries(
            "Tool-selection errors per call, by tool",
            "Tool-selection errors naming the tool divided by the tool's calls (a tool the agent never called, "
            "e.g. one it should have called, has no ratio: see the panel on the left).",
            [
                q(
                    ratio(
                        f"sum by (tool) (rate(monitor_tool_selection_errors_total{{{at}}}[{RATE}]))",
                        f"sum by (tool) (rate(monitor_tool_calls_total{{{at}}}[{RATE}]))",
                    ),
                    "{{tool}}",
                )
            ],
            unit="percentunit",
        ),
        table(
            "Tool-selection errors by tool and kind",
            "Tool-selection errors in the time range: the agent's confusions.",
            f"sum by (tool, kind) (increase(monitor_tool_selection_errors_total{{{at}}}[{RANGE}]))",
            w=24,
            h=7,
        ),
    )
    board.row(
        "Parameters",
        timeseries(
            "Parameter errors per second, by tool and kind",
            "Tool-parameter errors: missing or unknown parameters, wrong types, invalid or wrong values, …",
            [
                q(
                    f"sum by (tool, kind) (rate(monitor_parameter_errors_total{{{at}}}[{RATE}]))",
                    "{{tool}} · {{kind}}",
                )
            ],
            stack=True,
            table_legend=True,
        ),
        timeseries(
            "Parameter errors per call, by tool",
            "Parameter errors of each tool divided by its calls.",
            [
                q(
                    ratio(
                        f"sum by (tool) (rate(monitor_parameter_errors_total{{{at}}}[{RATE}]))",
                        f"sum by (tool) (rate(monitor_tool_calls_total{{{at}}}[{RATE}]))",
                    ),
                    "{{tool}}",
                )
            ],
            unit="percentunit",
        ),
    )
    board.row(
        "Latency and other failures",
        timeseries(
            "Latency-budget breaches per second, by tool",
            "Calls over the rules' tool_latency_budget_ms (tool_latency) and runs over run_latency_budget_ms "
            '(run_latency, tool "none"), found by latency_check. The daemon exports no latency histogram: '
            "latencies themselves are in the traces (exemplars).",
            [
                q(
                    f"sum by (tool, kind) (rate(monitor_failure_patterns_total"
                    f'{{{at},kind=~"{_alternation(LATENCY_KINDS)}"}}[{RATE}]))',
                    "{{tool}} · {{kind}}",
                )
            ],
            stack=True,
        ),
        timeseries(
            "Other failures per second, by kind",
            "Failures outside tool selection, parameters and latency: tool errors, loops, repeated or excess calls, "
            "goal not met, …",
            [
                q(
                    f"sum by (kind) (rate(monitor_failure_patterns_total"
                    f'{{{at},kind!~"{OTHER_KINDS_EXCLUDED_RE}"}}[{RATE}]))',
                    "{{kind}}",
                )
            ],
            stack=True,
        ),
    )
    s = 'scorer=~"$scorer"'
    board.row(
        "Scores (every agent: the score histogram has no agent label)",
        timeseries(
            "Median and 10th-percentile score, by scorer",
            "From monitor_score_ratio (buckets 0, 0.1, …, 0.9, 0.95, 1).",
            [
                q(
                    f"histogram_quantile(0.5, sum by (scorer, le) (rate(monitor_score_ratio_bucket{{{s}}}[{RATE}])))",
                    "{{scorer}} p50",
                ),
                q(
                    f"histogram_quantile(0.1, sum by (scorer, le) (rate(monitor_score_ratio_bucket{{{s}}}[{RATE}])))",
                    "{{scorer}} p10",
                    "B",
                ),
            ],
            unit="percentunit",
            max_val=1,
        ),
        timeseries(
            "Mean score, by scorer",
            "Sum of scores divided by their count.",
            [
                q(
                    f"sum by (scorer) (rate(monitor_score_ratio_sum{{{s}}}[{RATE}]))"
                    f" / sum by (scorer) (rate(monitor_score_ratio_count{{{s}}}[{RATE}]))",
                    "{{scorer}}",
                )
            ],
            unit="percentunit",
            max_val=1,
        ),
        score_heatmap(
            "Score distribution: $scorer",
            "Scores per bucket over time (one panel per selected scorer).",
            f'sum by (le) (increase(monitor_score_ratio_bucket{{scorer=~"$scorer"}}[{RATE}]))',
            repeat="scorer",
        ),
    )
    return board.json()


# ---------------------------------------------------------------------------------------------------------- pipeline


def pipeline() -> dict[str, Any]:
    i = 'instance=~"$instance"'
    board = Board(
        "atm-pipeline",
        "Agent tool monitor / Pipeline",
        "Daemon health: Kafka consumption, lag and commits, record-to-result latency, unrecognized spans, dead "
        "letters, pauses, the assembler, the store, judges.",
        [
            datasource_variable(),
            query_variable(
                "instance",
                "Daemon",
                "label_values(monitor_build_info, instance)",
                "Scrape targets (daemon replicas).",
            ),
        ],
    )
    board.row(
        "Status",
        stat("Daemons", "Daemons reporting metrics.", f"count(monitor_build_info{{{i}}})", decimals=0),
        stat(
            "Store",
            "1 while every daemon's results store answers; 0 since an attempt failed (/readyz fails after "
            "http.ready_max_store_outage_s).",
            f"min(monitor_store_available{{{i}}})",
            thresholds=[(None, "red"), (1, "green")],
            mappings=[
                dash.ValueMap(
                    options={
                        "0": dash.ValueMappingResult(text="unavailable", color="red", index=0),
                        "1": dash.ValueMappingResult(text="available", color="green", index=1),
                    }
                )
            ],
        ),
        stat(
            "Consumer lag",
            "Records between the consumers' positions and the ends of their partitions.",
            f"sum(monitor_consumer_lag_records{{{i}}})",
            decimals=0,
        ),
        stat(
            "Oldest commit",
            "Time since the least recent successful offset commit of any partition.",
            f"time() - min(monitor_last_commit_timestamp_seconds{{{i}}})",
            unit="s",
            thresholds=[(None, "green"), (300, "orange"), (600, "red")],
        ),
        stat(
            "Paused",
            "1 while a daemon pauses consumption for backpressure (any reason).",
            f"max(monitor_consumer_paused{{{i}}})",
            thresholds=[(None, "green"), (1, "orange")],
        ),
        stat(
            "Judge backlog",
            "Verdicts the daemons owe: queued, being judged, or judged and not stored yet.",
            f"sum(monitor_judge_backlog{{{i}}})",
            decimals=0,
        ),
    )
    board.row(
        "Kafka",
        timeseries(
            "Records consumed per second, by topic",
            "Kafka records consumed and spans decoded from them.",
            [
                q(f"sum by (topic) (rate(monitor_records_consumed_total{{{i}}}[{RATE}]))", "records {{topic}}"),
                q(f"sum(rate(monitor_spans_decoded_total{{{i}}}[{RATE}]))", "spans decoded", "B"),
            ],
        ),
        timeseries(
            "Consumer lag, by partition",
            "Records between the consumer's position and the end of the partition.",
            [q(f"sum by (topic, partition) (monitor_consumer_lag_records{{{i}}})", "{{topic}}/{{partition}}")],
        ),
        timeseries(
            "Time since last commit, by partition",
            "Age of the last successful offset commit. Offsets are not committed past unacknowledged dead letters or "
            "traces not stored yet.",
            [
                q(
                    f"time() - max by (topic, partition) (monitor_last_commit_timestamp_seconds{{{i}}})",
                    "{{topic}}/{{partition}}",
                )
            ],
            unit="s",
        ),
        timeseries(
            "Consumer paused, by reason",
            "1 while consumption is paused: store (unavailable), scoring (judge pool full), backlog (too many closed "
            "traces on their way), dead_letter (too many unacknowledged dead letters).",
            [q(f"max by (reason) (monitor_consumer_paused{{{i}}})", "{{reason}}")],
            max_val=1,
        ),
    )
    board.row(
        "Latency and span coverage",
        timeseries(
            "Record-to-result latency (p50, p90, p99), by daemon",
            "Seconds from the Kafka timestamp of a trace's last record to its results counted in the metrics "
            "(monitor_record_to_result_seconds). A trace waits assembler.root_idle_s after its last span; the rest "
            "is work queued inside the daemon, which the consumer lag does not show. Traces closed without a root "
            "span wait assembler.idle_s.",
            [
                q(
                    f"histogram_quantile({quantile}, sum by (instance, le) "
                    f"(rate(monitor_record_to_result_seconds_bucket{{{i}}}[{RATE}])))",
                    f"{{{{instance}}}} p{round(quantile * 100)}",
                    ref,
                )
                for quantile, ref in ((0.5, "A"), (0.9, "B"), (0.99, "C"))
            ],
            unit="s",
        ),
        timeseries(
            "Unrecognized spans per second, by scope",
            "Spans no known span convention reads, in traces that gave no run of a known convention, by "
            "instrumentation scope (the first 50 scope names, then 'other'): their agents' tool calls are missed "
            "or read from generic evidence only. `monitor inspect --explain` on one of their records shows why.",
            [rate_by("monitor_spans_unrecognized_total", "scope", i)],
            stack=True,
        ),
    )
    board.row(
        "Dead letters",
        timeseries(
            "Dead letters per second, by reason",
            "Records sent to the dead-letter topic <topic><kafka.dead_letter_suffix>.",
            [rate_by("monitor_records_dead_lettered_total", "reason", i)],
            stack=True,
            w=8,
        ),
        timeseries(
            "Undecodable records per second, by reason",
            "Records that could not be decoded (dead-lettered when dead_letter.enabled).",
            [rate_by("monitor_records_invalid_total", "reason", i)],
            stack=True,
            w=8,
        ),
        timeseries(
            "Dead letters pending",
            "Dead letters the broker has not acknowledged yet; offsets are not committed past them.",
            [q(f"sum(monitor_dead_letters_pending{{{i}}})", "pending")],
            w=8,
        ),
    )
    board.row(
        "Assembler",
        timeseries(
            "Open traces and buffered spans",
            "Traces the assembler holds open and the spans buffered across them.",
            [
                q(f"sum(monitor_traces_open{{{i}}})", "open traces"),
                q(f"sum(monitor_spans_open{{{i}}})", "buffered spans", "B"),
            ],
            w=6,
        ),
        timeseries(
            "Open trace bytes",
            "Encoded record bytes buffered across open traces (bounded by assembler.max_open_bytes).",
            [q(f"sum by (instance) (monitor_open_trace_bytes{{{i}}})", "{{instance}}")],
            unit="bytes",
            w=6,
        ),
        timeseries(
            "Oldest open trace age",
            "Age of the oldest open trace (0 when none is open).",
            [q(f"max by (instance) (monitor_oldest_open_trace_age_seconds{{{i}}})", "{{instance}}")],
            unit="s",
            w=6,
        ),
        timeseries(
            "Traces closed per second, by outcome",
            "complete and idle are normal; max_age, max_spans, memory and shutdown are forced closes. Late spans "
            "arrived after their trace closed; split traces had spans on more than one partition.",
            [
                rate_by("monitor_traces_closed_total", "outcome", i),
                q(f"sum(rate(monitor_late_spans_total{{{i}}}[{RATE}]))", "late spans", "B"),
                q(f"sum(rate(monitor_split_traces_total{{{i}}}[{RATE}]))", "split traces", "C"),
            ],
            w=6,
        ),
    )
    board.row(
        "Store and sampling",
        timeseries(
            "Store available",
            "1 while the results store answers, 0 since its last attempt failed.",
            [q(f"min by (instance) (monitor_store_available{{{i}}})", "{{instance}}")],
            max_val=1,
            w=6,
        ),
        timeseries(
            "Store writes per second, by outcome",
            "Results written: new, duplicate (a replay), error.",
            [rate_by("monitor_store_writes_total", "outcome", i)],
            stack=True,
            w=6,
        ),
        timeseries(
            "Sampling decisions per second",
            "Closed runs sampled for scoring or skipped (sampling settings).",
            [rate_by("monitor_runs_sampled_total", "decision", i)],
            stack=True,
            w=6,
        ),
        timeseries(
            "Label values folded into 'other'",
            "Agent or tool names the cardinality guard folded into 'other' (list them in metrics.known_agents / "
            "known_tools to keep them).",
            [rate_by("monitor_label_values_folded_total", "label", i)],
            w=6,
        ),
    )
    board.row(
        "Judges",
        timeseries(
            "Judge backlog",
            "Verdicts owed: queued, being judged, or judged and not yet stored.",
            [q(f"sum by (instance) (monitor_judge_backlog{{{i}}})", "{{instance}}")],
            w=8,
        ),
        timeseries(
            "Judge requests per second, by outcome",
            "Every attempt: ok, rate_limited (429), overloaded (529), server_error, timeout, connection, "
            "unauthorized, rejected.",
            [rate_by("monitor_judge_requests_total", "outcome", i)],
            stack=True,
            w=8,
        ),
        timeseries(
            "Judge request latency, by judge",
            "Median and 95th percentile of every attempt's latency (answered or not; batch requests excluded).",
            [
                q(
                    "histogram_quantile(0.5, sum by (judge, le) "
                    f"(rate(monitor_judge_request_duration_seconds_bucket{{{i}}}[{RATE}])))",
                    "{{judge}} p50",
                ),
                q(
                    "histogram_quantile(0.95, sum by (judge, le) "
                    f"(rate(monitor_judge_request_duration_seconds_bucket{{{i}}}[{RATE}])))",
                    "{{judge}} p95",
                    "B",
                ),
            ],
            unit="s",
            w=8,
        ),
        timeseries(
            "Runs not judged per second, by reason",
            "not_flagged, budget_priority, backlog, too_large, budget (a daily limit spent), expired.",
            [rate_by("monitor_judge_runs_dropped_total", "reason", i)],
            stack=True,
            w=8,
        ),
        timeseries(
            "Judge tokens per second, by kind",
            "Tokens of answered judge requests: input (uncached), output, cache_read, cache_write.",
            [rate_by("monitor_judge_tokens_total", "kind", i)],
            stack=True,
            w=8,
        ),
        timeseries(
            "Judge budget left",
            "What each configured budget limit still allows (USD and tokens per day, requests per minute).",
            [q(f"min by (scope, limit) (monitor_judge_budget_remaining{{{i}}})", "{{scope}} · {{limit}}")],
            w=8,
        ),
    )
    board.row(
        "Process",
        timeseries(
            "Resident memory",
            "Resident memory of each daemon process.",
            [
                q(
                    f"process_resident_memory_bytes and on (job, instance) monitor_build_info{{{i}}}",
                    "{{instance}}",
                )
            ],
            unit="bytes",
        ),
        timeseries(
            "CPU",
            "CPU seconds per second of each daemon process.",
            [
                q(
                    f"rate(process_cpu_seconds_total[{RATE}]) and on (job, instance) monitor_build_info{{{i}}}",
                    "{{instance}}",
                )
            ],
            unit="percentunit",
        ),
    )
    return board.json()


# ---------------------------------------------------------------------------------------------------------- files

DASHBOARDS: Final[dict[str, Callable[[], dict[str, Any]]]] = {
    "overview.json": overview,
    "agent.json": agent,
    "pipeline.json": pipeline,
}


def render(build: Callable[[], dict[str, Any]]) -> str:
    """The checked-in form: sorted keys, two-space indent, a final newline (stable diffs)."""
    return json.dumps(build(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail when a file differs from the generated JSON")
    parser.add_argument("--dir", type=Path, default=HERE, help="folder of the JSON files (default: dashboards/)")
    args = parser.parse_args(argv)
    stale = []
    for name, build in DASHBOARDS.items():
        path = args.dir / name
        text = render(build)
        if args.check:
            current = path.read_text(encoding="utf-8") if path.exists() else ""
            if current != text:
                stale.append(name)
                diff = difflib.unified_diff(
                    current.splitlines(keepends=True), text.splitlines(keepends=True), str(path), f"{name} (generated)"
                )
                sys.stdout.writelines(list(diff)[:200])
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    if stale:
        print(f"\n{', '.join(stale)} differ from the generator: run `python dashboards/generate.py`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
