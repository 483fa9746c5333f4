"""Prometheus recording rules and alerts of agent-tool-monitor, rendered into ``deploy/prometheus/rules.yaml``.

    python deploy/prometheus/generate.py                  # (re)write rules.yaml with the defaults
    python deploy/prometheus/generate.py --check          # exit 1, with a diff, when rules.yaml differs
    python deploy/prometheus/generate.py --objective 0.98 --agent-objective checkout=0.995 \\
        --grafana-url https://grafana.example.org --runbook-url https://git.example.org/runbook.md \\
        --output my-rules.yaml                            # your thresholds and links
    python deploy/prometheus/generate.py --scale 0.01 --output fast.yaml   # every duration x 0.01 (tests)

The checked-in ``rules.yaml`` is this script's output with the defaults (a test says so), so edit the script or
pass options; never edit the YAML by hand. Every option is listed by ``--help``; README.md explains them.

The rules use only metrics of ``monitor/export/metrics.py`` (docs/metrics.md) and ``up``. Names follow the
Prometheus convention ``level:metric:operations``: ``agent:monitor_runs_scored:rate1h`` is the per-second rate of
scored runs of each agent over one hour.

``--scale`` multiplies every duration (rate windows, baseline window and offset, ``for:``, the "per hour"
volume floors and the commit-age threshold) and keeps everything else, names included; the record-to-result
latency threshold stays as well (the daemon's own latency does not change with the rules' clock). The end-to-end test
renders the rules with a small scale so that a real Prometheus walks through hours of alerting in seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

HERE: Final = Path(__file__).resolve().parent
RULES: Final = HERE / "rules.yaml"

SLO_PERIOD: Final = "30d"
"""The period the tool-selection error budget is spent over (the burn-rate factors assume it)."""

PAGE_BURN: Final = (("1h", "5m", 14.4), ("6h", "30m", 6.0))
"""(long window, short window, burn-rate factor) pairs that page: 2 % of a 30-day budget in 1 h, 5 % in 6 h."""

TICKET_BURN: Final = (("1d", "2h", 3.0), ("3d", "6h", 1.0))
"""Pairs that open a ticket: 10 % of a 30-day budget in 1 d, 10 % in 3 d."""

WINDOWS: Final = ("5m", "30m", "1h", "2h", "6h", "1d", "3d")
"""Every rate window of the tool-selection SLI (the burn-rate pairs above use each)."""

DASHBOARDS: Final = {"overview": "atm-overview", "agent": "atm-agent", "pipeline": "atm-pipeline"}
"""Grafana dashboard uids of dashboards/*.json."""

_UNITS: Final = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


@dataclass(frozen=True)
class Options:
    """Every knob of the rules. The defaults render the checked-in rules.yaml."""

    objective: float = 0.95
    """Share of scored runs without a tool-selection error, per agent, over 30 days (the SLO)."""
    agent_objectives: Mapping[str, float] = field(default_factory=dict)
    """Per-agent objectives that replace ``objective`` for those agents."""
    min_runs_per_hour: float = 50
    """Agents scoring fewer runs per hour (on average over an alert's long window) never alert."""
    baseline_factor: float = 2.0
    """Tool-selection / parameter error ratio over 1 h must exceed this many times its 7-day baseline ..."""
    baseline_min_increase: float = 0.05
    """... and the baseline plus this (absolute), so a rise from 0.1 % to 0.3 % stays quiet."""
    min_calls_per_hour: float = 50
    """(agent, tool) pairs with fewer calls per hour never raise a parameter-error alert."""
    pass_rate_drop: float = 0.10
    """A scorer's pass rate over 1 h this far (absolute) below its 7-day baseline is a regression."""
    min_results_per_hour: float = 50
    """Scorers with fewer results per hour raise no pass-rate or error alert."""
    scorer_error_ratio: float = 0.05
    """Share of a scorer's results with status=error over 15 m that alerts."""
    judge_error_ratio: float = 0.25
    """Share of a judge's API requests that failed over 15 m that alerts."""
    min_judge_requests_per_hour: float = 20
    """Judges sending fewer requests per hour raise no request alert."""
    judge_dropped_runs: float = 10
    """Runs a judge dropped for backlog or expiry within 15 m that alert."""
    lag_records: float = 10000
    """Consumer lag (records, summed over a topic's partitions) that alerts."""
    commit_stall: str = "15m"
    """Age of a partition's last commit, while it has records to consume, that alerts."""
    dead_letter_ratio: float = 0.01
    """Share of consumed records sent to the dead-letter topic over 15 m that alerts."""
    record_to_result_p99_seconds: float = 10.0
    """99th percentile of a daemon's record-to-result latency over 10 m that alerts: ``assembler.root_idle_s`` (5 s
    by default, the floor of every trace) plus 5 s of queueing. Seconds of the daemon's own latency, so ``scale``
    leaves it alone; with another root_idle_s, render with that plus 5."""
    min_traces_per_hour: float = 600
    """Daemons counting fewer traces per hour (over the 10 m window) raise no latency alert: the p99 of a handful of
    traces is their slowest one (a trace re-read after a restart, one closed rootless after ``idle_s``)."""
    unrecognized_span_ratio: float = 0.05
    """Share of the spans a job decoded over 15 m that are of one instrumentation scope and read by no known span
    convention, that alerts."""
    min_spans_per_hour: float = 500
    """Jobs decoding fewer spans per hour raise no unrecognized-span alert."""
    job_selector: str = 'job=~".*agent-tool-monitor.*"'
    """Label matchers of the daemons' scrape job in ``up`` (the chart's ServiceMonitor: job="agent-tool-monitor")."""
    grafana_url: str = "https://grafana.example.com"
    """Base URL of the Grafana that has dashboards/*.json; the placeholder is for you (or the chart) to replace."""
    runbook_url: str = "https://github.com/example/agent-tool-monitor/blob/main/deploy/prometheus/runbook.md"
    """Where runbook.md is served; each alert links to its section (``#alertname`` in lower case)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Labels added to every alert (e.g. team=ml-platform), for Alertmanager routing."""
    scale: float = 1.0
    """Every duration times this (tests)."""

    def __post_init__(self) -> None:
        for name, value in (("objective", self.objective), *self.agent_objectives.items()):
            if not 0 < value < 1:
                raise ValueError(f"objective of {name}: {value} is not strictly between 0 and 1")
        if self.scale <= 0:
            raise ValueError(f"scale must be positive, not {self.scale}")
        if self.record_to_result_p99_seconds <= 0:
            raise ValueError(f"record_to_result_p99_seconds must be positive, not {self.record_to_result_p99_seconds}")
        if not 0 < self.unrecognized_span_ratio < 1:
            raise ValueError(f"unrecognized_span_ratio {self.unrecognized_span_ratio} is not strictly between 0 and 1")
        _seconds(self.commit_stall)
        for key in self.labels:
            if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", key) or key == "severity":
                raise ValueError(f"bad alert label name {key!r}")


# --------------------------------------------------------------------------- durations and numbers


def _seconds(text: str) -> float:
    """Seconds of a Prometheus duration (``90s``, ``15m``, ``1h30m``, ``7d``)."""
    m = re.fullmatch(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?", text)
    if not text or m is None:
        raise ValueError(f"not a duration: {text!r}")
    d, h, mi, s, ms = (int(g) if g else 0 for g in m.groups())
    return d * 86400 + h * 3600 + mi * 60 + s + ms / 1000


def _duration(seconds: float) -> str:
    """A Prometheus duration for ``seconds`` (rounded to milliseconds, at least 1 ms)."""
    ms = max(1, round(seconds * 1000))
    whole, rest = divmod(ms, 1000)
    out = ""
    for unit, size in _UNITS:
        n, whole = divmod(whole, size)
        if n:
            out += f"{n}{unit}"
    if rest:
        out += f"{rest}ms"
    return out


def _num(x: float) -> str:
    """A PromQL number literal: ``2``, ``0.05``, ``14.4``."""
    x = float(x)
    return str(int(x)) if x.is_integer() else repr(round(x, 9))


# --------------------------------------------------------------------------- templates

_FIRST_PERCENT: Final = (
    "{{{{ with query (printf `{query}` {args}) }}}}{{{{ . | first | value | humanizePercentage }}}}{{{{ end }}}}"
)
_FIRST_COUNT: Final = (
    '{{{{ with query (printf `{query}` {args}) }}}}{{{{ . | first | value | printf "%.0f" }}}}{{{{ end }}}}'
)
_FIRST_DURATION: Final = (
    "{{{{ with query (printf `{query}` {args}) }}}}{{{{ . | first | value | humanizeDuration }}}}{{{{ end }}}}"
)
_LIST: Final = (
    "{{{{ range $i, $s := query (printf `{query}` {args}) }}}}{{{{ if $i }}}}, {{{{ end }}}}{item}{{{{ end }}}}"
)


def _first_percent(query: str, *args: str) -> str:
    """Template text: the first value of ``query`` (printf'd with ``args``) as a percentage, or nothing."""
    return _FIRST_PERCENT.format(query=query, args=" ".join(args))


def _first_count(query: str, *args: str) -> str:
    return _FIRST_COUNT.format(query=query, args=" ".join(args))


def _first_duration(query: str, *args: str) -> str:
    """Template text: the first value of ``query`` (seconds) as a duration (``5.6s``, ``1m 3s``), or nothing."""
    return _FIRST_DURATION.format(query=query, args=" ".join(args))


def _list(query: str, item: str, *args: str) -> str:
    """Template text: ``item`` for each sample of ``query``, comma-separated (``$s`` is the sample)."""
    return _LIST.format(query=query, item=item, args=" ".join(args))


def anchor(alert: str) -> str:
    """The runbook.md section of ``alert`` (GitHub's anchor of a ``## AlertName`` heading)."""
    return alert.lower()


# --------------------------------------------------------------------------- the rules


class _Rules:
    def __init__(self, opts: Options) -> None:
        self.o = opts

    # durations, scaled
    def d(self, text: str) -> str:
        return _duration(_seconds(text) * self.o.scale)

    def secs(self, text: str) -> str:
        return _num(_seconds(text) * self.o.scale)

    def per_hour(self, rate: str, floor: float) -> str:
        """``rate`` (per second, recorded or an expression) times one hour ``>= floor``."""
        return f"{rate} * {self.secs('1h')} >= {_num(floor)}"

    def alert(
        self,
        name: str,
        expr: str,
        for_: str,
        severity: str,
        summary: str,
        description: str,
        dashboard: str,
    ) -> dict[str, Any]:
        labels = {"severity": severity, **self.o.labels}
        return {
            "alert": name,
            "expr": expr.strip() + "\n" if "\n" in expr.strip() else expr.strip(),
            "for": self.d(for_),
            "labels": labels,
            "annotations": {
                "summary": summary,
                "description": description,
                "dashboard": f"{self.o.grafana_url.rstrip('/')}/d/{dashboard}",
                "runbook_url": f"{self.o.runbook_url}#{anchor(name)}",
            },
        }

    @staticmethod
    def record(name: str, expr: str) -> dict[str, Any]:
        expr = expr.strip()
        return {"record": name, "expr": expr + "\n" if "\n" in expr else expr}

    # ------------------------------------------------------------------ tool selection (recording)

    def tool_selection_recording(self) -> list[dict[str, Any]]:
        o, d = self.o, self.d
        rules: list[dict[str, Any]] = []
        for w in WINDOWS:
            rules += [
                self.record(
                    f"agent:monitor_runs_scored:rate{w}",
                    f"sum by (agent) (rate(monitor_runs_scored_total[{d(w)}]))",
                ),
                self.record(
                    f"agent:monitor_tool_selection_errors:rate{w}",
                    f"""
sum by (agent) (rate(monitor_tool_selection_errors_total[{d(w)}]))
  or 0 * agent:monitor_runs_scored:rate{w}""",
                ),
                self.record(
                    f"agent:monitor_tool_selection_errors_per_run:ratio_rate{w}",
                    f"""
agent:monitor_tool_selection_errors:rate{w}
  / on (agent) (agent:monitor_runs_scored:rate{w} > 0)""",
                ),
            ]
        rules.append(
            self.record(
                "agent:monitor_tool_selection_errors_per_run:ratio_baseline7d",
                f"""
sum_over_time(agent:monitor_tool_selection_errors:rate1h[{d("7d")}] offset {d("1h")})
  / on (agent) (sum_over_time(agent:monitor_runs_scored:rate1h[{d("7d")}] offset {d("1h")}) > 0)""",
            )
        )
        default = (
            "group by (agent) (monitor_runs_scored_total)"
            " * on () group_left () monitor:tool_selection_slo:objective_ratio"
        )
        if o.agent_objectives:
            overrides = "\n  or ".join(
                f'label_replace(vector({_num(v)}), "agent", "{a}", "", "")'
                for a, v in sorted(o.agent_objectives.items())
            )
            per_agent = f"\n  {overrides}\nor on (agent)\n  {default}"
        else:
            per_agent = default
        rules += [
            self.record("monitor:tool_selection_slo:objective_ratio", f"vector({_num(o.objective)})"),
            self.record("agent:monitor_tool_selection_slo:objective_ratio", per_agent),
            self.record(
                "agent:monitor_tool_selection_slo:error_budget_ratio",
                "1 - agent:monitor_tool_selection_slo:objective_ratio",
            ),
        ]
        rules += [
            self.record(
                f"agent:monitor_tool_selection_slo:burn_rate{w}",
                f"""
agent:monitor_tool_selection_errors_per_run:ratio_rate{w}
  / on (agent) agent:monitor_tool_selection_slo:error_budget_ratio""",
            )
            for w in WINDOWS
        ]
        return rules

    # ------------------------------------------------------------------ parameter errors, scorers (recording)

    def quality_recording(self) -> list[dict[str, Any]]:
        d = self.d
        return [
            self.record(
                "agent_tool:monitor_tool_calls:rate1h",
                f"sum by (agent, tool) (rate(monitor_tool_calls_total[{d('1h')}]))",
            ),
            self.record(
                "agent_tool:monitor_parameter_errors:rate1h",
                f"""
sum by (agent, tool) (rate(monitor_parameter_errors_total[{d("1h")}]))
  or 0 * agent_tool:monitor_tool_calls:rate1h""",
            ),
            self.record(
                "agent_tool:monitor_parameter_errors_per_call:ratio_rate1h",
                """
agent_tool:monitor_parameter_errors:rate1h
  / on (agent, tool) (agent_tool:monitor_tool_calls:rate1h > 0)""",
            ),
            self.record(
                "agent_tool:monitor_parameter_errors_per_call:ratio_baseline7d",
                f"""
sum_over_time(agent_tool:monitor_parameter_errors:rate1h[{d("7d")}] offset {d("1h")})
  / on (agent, tool) (sum_over_time(agent_tool:monitor_tool_calls:rate1h[{d("7d")}] offset {d("1h")}) > 0)""",
            ),
            self.record(
                "scorer:monitor_scorer_results_graded:rate1h",
                'sum by (scorer) (rate(monitor_scorer_results_total{status="scored", passed=~"true|false"}'
                f"[{d('1h')}]))",
            ),
            self.record(
                "scorer:monitor_scorer_results_passed:rate1h",
                f"""
sum by (scorer) (rate(monitor_scorer_results_total{{status="scored", passed="true"}}[{d("1h")}]))
  or 0 * scorer:monitor_scorer_results_graded:rate1h""",
            ),
            self.record(
                "scorer:monitor_scorer_pass:ratio_rate1h",
                """
scorer:monitor_scorer_results_passed:rate1h
  / on (scorer) (scorer:monitor_scorer_results_graded:rate1h > 0)""",
            ),
            self.record(
                "scorer:monitor_scorer_pass:ratio_baseline7d",
                f"""
sum_over_time(scorer:monitor_scorer_results_passed:rate1h[{d("7d")}] offset {d("1h")})
  / on (scorer) (sum_over_time(scorer:monitor_scorer_results_graded:rate1h[{d("7d")}] offset {d("1h")}) > 0)""",
            ),
        ]

    # ------------------------------------------------------------------ quality alerts

    def _top_selection_errors(self) -> str:
        return _list(
            "sort_desc(topk(3, sum by (tool, kind) (increase(monitor_tool_selection_errors_total{agent=%q}"
            f"[{self.d('1h')}]))))",
            '{{ $s.Labels.tool }} ({{ $s.Labels.kind }}: {{ printf "%.0f" $s.Value }})',
            "$labels.agent",
        )

    def quality_alerts(self) -> list[dict[str, Any]]:
        o, d = self.o, self.d
        agent_dash = DASHBOARDS["agent"] + "?var-agent={{ $labels.agent | urlquery }}"
        runs_last_hour = _first_count(
            f"agent:monitor_runs_scored:rate1h{{agent=%q}} * {self.secs('1h')}", "$labels.agent"
        )
        objective = _first_percent("agent:monitor_tool_selection_slo:objective_ratio{agent=%q}", "$labels.agent")

        def burn(pairs: Sequence[tuple[str, str, float]]) -> str:
            branches = [
                f"""
(
    agent:monitor_tool_selection_slo:burn_rate{long} > {_num(factor)}
  and on (agent)
    agent:monitor_tool_selection_slo:burn_rate{short} > {_num(factor)}
  and on (agent)
    {self.per_hour(f"agent:monitor_runs_scored:rate{long}", o.min_runs_per_hour)}
)"""
                for long, short, factor in pairs
            ]
            return "\nor on (agent)".join(branches)

        def thresholds(pairs: Sequence[tuple[str, str, float]]) -> str:
            return " or ".join(f"{_num(f)}x over {long} and {short}" for long, short, f in pairs)

        return [
            self.alert(
                "ToolSelectionErrorsAboveBaseline",
                f"""
agent:monitor_tool_selection_errors_per_run:ratio_rate1h
  > on (agent) ({_num(o.baseline_factor)} * agent:monitor_tool_selection_errors_per_run:ratio_baseline7d)
and on (agent)
agent:monitor_tool_selection_errors_per_run:ratio_rate1h
  > on (agent) (agent:monitor_tool_selection_errors_per_run:ratio_baseline7d + {_num(o.baseline_min_increase)})
and on (agent)
{self.per_hour("agent:monitor_runs_scored:rate1h", o.min_runs_per_hour)}""",
                "15m",
                "critical",
                "Tool-selection errors of agent {{ $labels.agent }} rose above its 7-day baseline",
                "Agent {{ $labels.agent }} made {{ $value | humanizePercentage }} tool-selection errors per scored run "
                "over the last hour, against "
                + _first_percent(
                    "agent:monitor_tool_selection_errors_per_run:ratio_baseline7d{agent=%q}", "$labels.agent"
                )
                + f" over the 7 days before ({runs_last_hour} runs scored in the last hour). "
                f"Most errors by tool: {self._top_selection_errors()}.",
                agent_dash,
            ),
            self.alert(
                "ToolSelectionErrorBudgetFastBurn",
                burn(PAGE_BURN),
                "2m",
                "critical",
                "Agent {{ $labels.agent }} is burning its tool-selection error budget fast",
                'Agent {{ $labels.agent }} spends its tool-selection error budget {{ printf "%.1f" $value }} times as '
                f"fast as its objective allows ({objective} of scored runs without a tool-selection error over "
                f"{SLO_PERIOD}; pages at {thresholds(PAGE_BURN)}). {runs_last_hour} runs scored in the last hour. "
                f"Most errors by tool: {self._top_selection_errors()}.",
                agent_dash,
            ),
            self.alert(
                "ToolSelectionErrorBudgetSlowBurn",
                burn(TICKET_BURN),
                "15m",
                "warning",
                "Agent {{ $labels.agent }} is using up its tool-selection error budget",
                'Agent {{ $labels.agent }} spends its tool-selection error budget {{ printf "%.1f" $value }} times as '
                f"fast as its objective allows ({objective} of scored runs without a tool-selection error over "
                f"{SLO_PERIOD}; tickets at {thresholds(TICKET_BURN)}). "
                f"Most errors by tool over the last hour: {self._top_selection_errors()}.",
                agent_dash,
            ),
            self.alert(
                "ToolParameterErrorsAboveBaseline",
                f"""
agent_tool:monitor_parameter_errors_per_call:ratio_rate1h
  > on (agent, tool) ({_num(o.baseline_factor)} * agent_tool:monitor_parameter_errors_per_call:ratio_baseline7d)
and on (agent, tool)
agent_tool:monitor_parameter_errors_per_call:ratio_rate1h
  > on (agent, tool) (agent_tool:monitor_parameter_errors_per_call:ratio_baseline7d + {_num(o.baseline_min_increase)})
and on (agent, tool)
{self.per_hour("agent_tool:monitor_tool_calls:rate1h", o.min_calls_per_hour)}""",
                "30m",
                "warning",
                "Parameter errors of agent {{ $labels.agent }} calling {{ $labels.tool }} rose above their 7-day "
                "baseline",
                "{{ $value | humanizePercentage }} of the calls agent {{ $labels.agent }} made to tool "
                "{{ $labels.tool }} had a parameter error over the last hour, against "
                + _first_percent(
                    "agent_tool:monitor_parameter_errors_per_call:ratio_baseline7d{agent=%q, tool=%q}",
                    "$labels.agent",
                    "$labels.tool",
                )
                + " over the 7 days before ("
                + _first_count(
                    f"agent_tool:monitor_tool_calls:rate1h{{agent=%q, tool=%q}} * {self.secs('1h')}",
                    "$labels.agent",
                    "$labels.tool",
                )
                + " calls in the last hour). By kind: "
                + _list(
                    "sort_desc(sum by (kind) (increase(monitor_parameter_errors_total{agent=%q, tool=%q}"
                    f"[{d('1h')}])))",
                    '{{ $s.Labels.kind }} ({{ printf "%.0f" $s.Value }})',
                    "$labels.agent",
                    "$labels.tool",
                )
                + ".",
                agent_dash + "&var-tool={{ $labels.tool | urlquery }}",
            ),
            self.alert(
                "ScorerPassRateRegression",
                f"""
scorer:monitor_scorer_pass:ratio_rate1h
  < on (scorer) (scorer:monitor_scorer_pass:ratio_baseline7d - {_num(o.pass_rate_drop)})
and on (scorer)
{self.per_hour("scorer:monitor_scorer_results_graded:rate1h", o.min_results_per_hour)}""",
                "30m",
                "warning",
                "Scorer {{ $labels.scorer }} passes fewer runs than over the last 7 days",
                "Scorer {{ $labels.scorer }} passed {{ $value | humanizePercentage }} of the runs it graded over the "
                "last hour, against "
                + _first_percent("scorer:monitor_scorer_pass:ratio_baseline7d{scorer=%q}", "$labels.scorer")
                + " over the 7 days before ("
                + _first_count(
                    f"scorer:monitor_scorer_results_graded:rate1h{{scorer=%q}} * {self.secs('1h')}", "$labels.scorer"
                )
                + " results in the last hour).",
                DASHBOARDS["overview"],
            ),
            self.alert(
                "ScorerErrorsHigh",
                f"""
sum by (scorer) (rate(monitor_scorer_results_total{{status="error"}}[{d("15m")}]))
  / on (scorer) sum by (scorer) (rate(monitor_scorer_results_total[{d("15m")}]))
  > {_num(o.scorer_error_ratio)}
and on (scorer)
{self.per_hour(f"sum by (scorer) (rate(monitor_scorer_results_total[{d('15m')}]))", o.min_results_per_hour)}""",
                "15m",
                "warning",
                "Scorer {{ $labels.scorer }} cannot score runs",
                "{{ $value | humanizePercentage }} of the results of scorer {{ $labels.scorer }} over the last 15 "
                "minutes are errors (status=error): those runs have no verdict from it.",
                DASHBOARDS["overview"],
            ),
        ]

    # ------------------------------------------------------------------ judges

    def judge_alerts(self) -> list[dict[str, Any]]:
        o, d = self.o, self.d
        return [
            self.alert(
                "JudgeBudgetExhausted",
                'monitor_judge_budget_remaining{limit=~".*_per_day"} <= 0',
                "10m",
                "warning",
                "Judge budget {{ $labels.scope }} / {{ $labels.limit }} is spent",
                "The {{ $labels.limit }} budget of judge scope {{ $labels.scope }} on {{ $labels.instance }} is spent "
                "({{ $value }} left): judges of that scope judge no more runs until the daily budget refills, and the "
                'runs they skip count in monitor_judge_runs_dropped_total{reason="budget"}.',
                DASHBOARDS["overview"],
            ),
            self.alert(
                "JudgeRequestsFailing",
                f"""
sum by (judge) (rate(monitor_judge_requests_total{{outcome!="ok"}}[{d("15m")}]))
  / on (judge) sum by (judge) (rate(monitor_judge_requests_total[{d("15m")}]))
  > {_num(o.judge_error_ratio)}
and on (judge)
{self.per_hour(f"sum by (judge) (rate(monitor_judge_requests_total[{d('15m')}]))", o.min_judge_requests_per_hour)}""",
                "15m",
                "warning",
                "Requests of judge {{ $labels.judge }} fail",
                "{{ $value | humanizePercentage }} of the API requests of judge {{ $labels.judge }} over the last 15 "
                "minutes failed. By outcome: "
                + _list(
                    'sort_desc(sum by (outcome) (increase(monitor_judge_requests_total{judge=%q, outcome!="ok"}'
                    f"[{d('15m')}])))",
                    '{{ $s.Labels.outcome }} ({{ printf "%.0f" $s.Value }})',
                    "$labels.judge",
                )
                + ".",
                DASHBOARDS["pipeline"],
            ),
            self.alert(
                "JudgeRunsDropped",
                f"""
sum by (judge, reason) (increase(monitor_judge_runs_dropped_total{{reason=~"backlog|expired"}}[{d("15m")}]))
  > {_num(o.judge_dropped_runs)}""",
                "15m",
                "warning",
                "Judge {{ $labels.judge }} drops runs ({{ $labels.reason }})",
                'Judge {{ $labels.judge }} dropped {{ printf "%.0f" $value }} runs it should have judged in the last '
                "15 minutes, reason {{ $labels.reason }}: the judge pool cannot keep up with the sampled runs.",
                DASHBOARDS["pipeline"],
            ),
        ]

    # ------------------------------------------------------------------ pipeline

    def pipeline_alerts(self) -> list[dict[str, Any]]:
        o, d = self.o, self.d
        sel = o.job_selector
        pipeline_instance = DASHBOARDS["pipeline"] + "?var-instance={{ $labels.instance | urlquery }}"
        latency_count = f"sum by (job, instance) (rate(monitor_record_to_result_seconds_count[{d('10m')}]))"
        return [
            self.alert(
                "AgentToolMonitorConsumerLagHigh",
                f"""
sum by (topic) (max by (topic, partition) (monitor_consumer_lag_records))
  > {_num(o.lag_records)}""",
                "15m",
                "warning",
                "The monitor is {{ $value | humanize }} records behind on topic {{ $labels.topic }}",
                "The daemons are {{ $value | humanize }} records behind the end of topic {{ $labels.topic }} (summed "
                "over its partitions): runs are scored late, so quality alerts fire late too.",
                DASHBOARDS["pipeline"],
            ),
            self.alert(
                "AgentToolMonitorRecordToResultLatencyHigh",
                f"""
histogram_quantile(0.99, sum by (job, instance, le) (rate(monitor_record_to_result_seconds_bucket[{d("10m")}])))
  > {_num(o.record_to_result_p99_seconds)}
and on (job, instance)
{self.per_hour(latency_count, o.min_traces_per_hour)}""",
                "15m",
                "warning",
                "Results of {{ $labels.instance }} come {{ $value | humanizeDuration }} after their records (p99)",
                "On the daemon {{ $labels.instance }} (job {{ $labels.job }}), 1 trace in 100 over the last 10 "
                "minutes had its results counted more than {{ $value | humanizeDuration }} after the Kafka timestamp "
                f"of its last record (p99; alerts above {_num(o.record_to_result_p99_seconds)} s; the median is "
                + _first_duration(
                    "histogram_quantile(0.5, sum by (le) (rate(monitor_record_to_result_seconds_bucket"
                    f"{{job=%q, instance=%q}}[{d('10m')}])))",
                    "$labels.job",
                    "$labels.instance",
                )
                + ", over "
                + _first_count(
                    f"sum(increase(monitor_record_to_result_seconds_count{{job=%q, instance=%q}}[{d('10m')}]))",
                    "$labels.job",
                    "$labels.instance",
                )
                + " traces). A trace waits assembler.root_idle_s after its last span; the rest is work queued inside "
                "the daemon, which the consumer lag does not show: runs are scored late, so quality alerts fire late "
                "too.",
                pipeline_instance,
            ),
            self.alert(
                "AgentToolMonitorCommitsStalled",
                f"""
time() - max by (topic, partition) (monitor_last_commit_timestamp_seconds) > {self.secs(o.commit_stall)}
and on (topic, partition)
(
    max by (topic, partition) (monitor_consumer_lag_records) > 0
  or
    sum by (topic, partition) (rate(monitor_records_consumed_total[{d("15m")}])) > 0
)""",
                "5m",
                "warning",
                "Offsets of {{ $labels.topic }}/{{ $labels.partition }} are not committed",
                "No offset of partition {{ $labels.partition }} of topic {{ $labels.topic }} was committed for "
                "{{ $value | humanizeDuration }} although the partition has records to consume: a trace held open, "
                "an unacknowledged dead letter or a failing commit holds it. A restart would re-read everything "
                "since the last commit.",
                DASHBOARDS["pipeline"],
            ),
            self.alert(
                "AgentToolMonitorDeadLetterRateHigh",
                f"""
sum by (job) (rate(monitor_records_dead_lettered_total[{d("15m")}]))
  / on (job) sum by (job) (rate(monitor_records_consumed_total[{d("15m")}]))
  > {_num(o.dead_letter_ratio)}""",
                "15m",
                "warning",
                "{{ $value | humanizePercentage }} of the records {{ $labels.job }} consumes are dead-lettered",
                "{{ $value | humanizePercentage }} of the records consumed by {{ $labels.job }} over the last 15 "
                "minutes went to the dead-letter topic. By reason: "
                + _list(
                    f"sort_desc(sum by (reason) (increase(monitor_records_dead_lettered_total{{job=%q}}[{d('15m')}])))",
                    '{{ $s.Labels.reason }} ({{ printf "%.0f" $s.Value }})',
                    "$labels.job",
                )
                + ".",
                DASHBOARDS["pipeline"],
            ),
            self.alert(
                "AgentToolMonitorSpansUnrecognized",
                f"""
sum by (job, scope) (rate(monitor_spans_unrecognized_total[{d("15m")}]))
  / on (job) group_left () sum by (job) (rate(monitor_spans_decoded_total[{d("15m")}]))
  > {_num(o.unrecognized_span_ratio)}
and on (job)
{self.per_hour(f"sum by (job) (rate(monitor_spans_decoded_total[{d('15m')}]))", o.min_spans_per_hour)}""",
                "30m",
                "warning",
                "No span convention reads the spans of scope {{ $labels.scope }}",
                "{{ $value | humanizePercentage }} of the spans {{ $labels.job }} decoded over the last 15 minutes ("
                + _first_count(
                    f"sum(increase(monitor_spans_unrecognized_total{{job=%q, scope=%q}}[{d('15m')}]))",
                    "$labels.job",
                    "$labels.scope",
                )
                + " spans) are of instrumentation scope {{ $labels.scope }} and read by no known span convention: "
                "their traces give no run, or a generic one from guessed keys, so the tool calls of the agents behind "
                "them are missed or half read and their quality alerts may never fire. `monitor inspect --explain` on "
                "one of their records shows span by span what is missing.",
                DASHBOARDS["pipeline"],
            ),
            self.alert(
                "AgentToolMonitorStoreUnavailable",
                "monitor_store_available == 0",
                "5m",
                "critical",
                "The results store does not answer {{ $labels.instance }}",
                "The daemon {{ $labels.instance }} (job {{ $labels.job }}) cannot reach its results store: it holds "
                "its work and pauses consumption, its /readyz fails after http.ready_max_store_outage_s, and no "
                "quality metric moves, so no quality alert can fire.",
                pipeline_instance,
            ),
            self.alert(
                "AgentToolMonitorDown",
                f"up{{{sel}}} == 0",
                "5m",
                "critical",
                "The monitor daemon {{ $labels.instance }} is down",
                "Prometheus cannot scrape the daemon {{ $labels.instance }} (job {{ $labels.job }}): it is not "
                "running, not ready to serve /metrics, or unreachable. Its partitions move to the other daemons of "
                "the consumer group, if there are any.",
                pipeline_instance,
            ),
            self.alert(
                "AgentToolMonitorAbsent",
                f"absent(up{{{sel}}})",
                "15m",
                "critical",
                "No monitor daemon is scraped",
                f"Prometheus has no scrape target matching up{{{sel}}}: no daemon is deployed, or service discovery "
                "(ServiceMonitor, scrape config) does not find it. Agents are not monitored.",
                DASHBOARDS["pipeline"],
            ),
        ]

    def groups(self) -> list[dict[str, Any]]:
        return [
            {"name": "agent-tool-monitor.tool-selection.rules", "rules": self.tool_selection_recording()},
            {"name": "agent-tool-monitor.quality.rules", "rules": self.quality_recording()},
            {"name": "agent-tool-monitor.quality.alerts", "rules": self.quality_alerts()},
            {"name": "agent-tool-monitor.judges.alerts", "rules": self.judge_alerts()},
            {"name": "agent-tool-monitor.pipeline.alerts", "rules": self.pipeline_alerts()},
        ]


_GROUP_COMMENTS: Final = {
    "agent-tool-monitor.tool-selection.rules": (
        "The tool-selection SLI per agent (errors per scored run) over each window, its 7-day baseline (the 7 days\n"
        "before the last hour), the objective (change it with --objective / --agent-objective) and burn rates."
    ),
    "agent-tool-monitor.quality.rules": "Parameter errors per call by agent and tool; scorers' pass rates; baselines.",
    "agent-tool-monitor.quality.alerts": "Pages and tickets about agents' tool use and the scorers.",
    "agent-tool-monitor.judges.alerts": "LLM judges: budget, API errors, dropped runs.",
    "agent-tool-monitor.pipeline.alerts": (
        "The daemon: Kafka lag and commits, record-to-result latency, dead letters, unrecognized spans, store, scrape."
    ),
}


# --------------------------------------------------------------------------- YAML


class _Dumper(yaml.SafeDumper):
    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str)


def _header(opts: Options) -> str:
    defaults = Options()
    changed = [
        f"{f.name}={getattr(opts, f.name)!r}"
        for f in dataclasses.fields(Options)
        if getattr(opts, f.name) != getattr(defaults, f.name)
    ]
    return (
        "# Recording rules and alerts of agent-tool-monitor: deploy/prometheus/README.md; runbook: runbook.md.\n"
        "# GENERATED by deploy/prometheus/generate.py: change the generator or its options, not this file.\n"
        f"# Options: {', '.join(changed) if changed else 'the defaults'}.\n"
    )


def render(opts: Options | None = None) -> str:
    """The rules file for ``opts`` (the defaults: the checked-in rules.yaml)."""
    opts = opts or Options()
    doc = {"groups": _Rules(opts).groups()}
    text = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=10**6, allow_unicode=True, default_flow_style=False)
    for name, comment in _GROUP_COMMENTS.items():
        prefix = "".join(f"  # {line}\n" for line in comment.splitlines())
        text = text.replace(f"  - name: {name}\n", f"\n{prefix}  - name: {name}\n", 1)
    return _header(opts) + text


def prometheus_rule(text: str, name: str, namespace: str | None = None, labels: Mapping[str, str] | None = None) -> str:
    """The rules file ``text`` as a Prometheus Operator ``PrometheusRule`` manifest (its groups under ``spec``)."""
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    metadata["labels"] = {"app.kubernetes.io/part-of": "agent-tool-monitor", **(labels or {})}
    doc = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": metadata,
        "spec": {"groups": yaml.safe_load(text)["groups"]},
    }
    header = "".join(line + "\n" for line in text.splitlines() if line.startswith("# "))
    body = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=10**6, allow_unicode=True, default_flow_style=False)
    return header + body


def alerts(text: str) -> list[dict[str, Any]]:
    """Every alerting rule of a rules file's text."""
    doc = yaml.safe_load(text)
    return [r for g in doc["groups"] for r in g["rules"] if "alert" in r]


# --------------------------------------------------------------------------- CLI


def _pairs(values: Sequence[str], what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        key, sep, val = v.partition("=")
        if not sep or not key:
            raise SystemExit(f"{what}: expected KEY=VALUE, got {v!r}")
        out[key] = val
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output", "-o", type=Path, default=RULES, help=f"file to write (default {RULES.name})")
    p.add_argument("--check", action="store_true", help="compare with --output instead of writing; exit 1 on a diff")
    p.add_argument(
        "--agent-objective",
        action="append",
        default=[],
        metavar="AGENT=RATIO",
        help="an agent's own objective (repeatable)",
    )
    p.add_argument(
        "--label", action="append", default=[], metavar="KEY=VALUE", help="label on every alert (repeatable)"
    )
    p.add_argument(
        "--prometheus-rule",
        metavar="NAME",
        default=None,
        help="write a Prometheus Operator PrometheusRule manifest of this name instead of a rules file",
    )
    p.add_argument("--namespace", default=None, help="with --prometheus-rule: its namespace")
    p.add_argument(
        "--rule-label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="with --prometheus-rule: a label of the manifest, e.g. the one your Prometheus' ruleSelector matches",
    )
    for f in dataclasses.fields(Options):
        if f.name in ("agent_objectives", "labels"):
            continue
        default = getattr(Options(), f.name)
        p.add_argument(
            "--" + f.name.replace("_", "-"),
            type=float if f.type == "float" else str,
            default=default,
            help=f"default {default}",
        )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    values = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(Options)
        if f.name not in ("agent_objectives", "labels")
    }
    objectives = {k: float(v) for k, v in _pairs(args.agent_objective, "--agent-objective").items()}
    try:
        opts = Options(agent_objectives=objectives, labels=_pairs(args.label, "--label"), **values)
    except ValueError as exc:
        print(f"generate.py: {exc}", file=sys.stderr)
        return 2
    text = render(opts)
    if args.prometheus_rule:
        text = prometheus_rule(text, args.prometheus_rule, args.namespace, _pairs(args.rule_label, "--rule-label"))
    elif args.namespace or args.rule_label:
        print("generate.py: --namespace and --rule-label need --prometheus-rule", file=sys.stderr)
        return 2
    out: Path = args.output
    if args.check:
        current = out.read_text() if out.exists() else ""
        if current == text:
            return 0
        sys.stdout.writelines(
            difflib.unified_diff(current.splitlines(True), text.splitlines(True), str(out), "generated")
        )
        print(f"\n{out} differs from the generator's output: run python {Path(__file__).name}", file=sys.stderr)
        return 1
    out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
