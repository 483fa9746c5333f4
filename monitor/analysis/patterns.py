"""Failure patterns: the issues of a window rolled up into the taxonomy (SCORING §5.3) per agent, tool and parameter,
with rates, the trend against the previous window, and the wrong-tool confusions.

A **pattern** is one (agent, kind, tool, parameter[, expected tool]). Its numbers:

* ``runs`` hurt (distinct runs with such an issue), ``issues``, ``error_runs`` (runs with an issue of severity
  ``error``; the rest only had warnings);
* ``run_rate`` = runs hurt / runs of the agent in the window; ``call_rate`` = issues / calls of the tool by the
  agent (for kinds about a call);
* ``trend``: the run rate against the previous window of the same length, with the P-value of a two-sided test of
  two proportions (:mod:`monitor.analysis.stats`): the change is ``significant`` when P < ``significance``;
* ``impact`` = (error runs + ½ × warning-only runs) × 1.5 when the tool changes state
  (:func:`~monitor.analysis.definitions.state_changing`). Recommendations are ranked by it.

**Confusions** (a call of tool X where Y was expected), per run, strongest evidence first:

1. ``wrong_tool`` issues: X is the issue's tool, Y its ``expected_tool`` (reference scorers via SCORING §2.0 step 3,
   and the tool-selection judge) — source ``expectation`` (or ``judge``);
2. a ``missing_tool`` Y and, in the same run, an ``unnecessary_tool`` or ``forbidden_tool`` call X, paired in call
   order — source ``paired``;
3. a ``missing_tool`` Y in a run that called offered tools other than Y and never Y (scorers such as
   ``tools_selected`` compare name sets and report only what is missing) — source ``inferred``: the first such
   call is taken as the one made instead of Y.

The missing Y of a confusion no longer counts as ``missing_tool``, nor its unnecessary call X as
``unnecessary_tool``: the run is counted once, as a ``wrong_tool`` pattern. A missing Y in a run that called an
invented name (a ``hallucinated_tool`` issue, or a name the agent never offered) goes to that ``hallucinated_tool``
pattern (``instead_of``). A missing Y in a run that called nothing else stays ``missing_tool``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from typing import Final, Literal

from monitor.analysis.definitions import DefinitionIndex, state_changing
from monitor.analysis.model import CATEGORY_OF, Category, SelectionIssue, Window, WindowData
from monitor.analysis.stats import Comparison, compare

__all__ = [
    "SEVERITY_WEIGHT",
    "STATE_CHANGING_WEIGHT",
    "AgentSummary",
    "Analysis",
    "Confusion",
    "Pattern",
    "Trend",
    "active_patterns",
    "analyze",
    "find_confusions",
    "find_patterns",
]

SEVERITY_WEIGHT: Final = {"error": 1.0, "warning": 0.5}
STATE_CHANGING_WEIGHT: Final = 1.5

# kinds about one call, whose rate is per call of the tool (the others: per run of the agent only)
_RUN_LEVEL_KINDS: Final = frozenset({"missing_tool", "wrong_order", "excess_calls", "run_latency"})

Source = Literal["issues", "expectation", "judge", "paired", "inferred"]
Direction = Literal["up", "down", "flat", "new", "none"]


@dataclass(frozen=True, slots=True)
class Trend:
    """This window's run rate against the previous window's (``direction`` ``new``: no runs hurt before;
    ``none``: no runs of the agent in one of the windows, so nothing to compare)."""

    previous_runs: int
    previous_agent_runs: int
    previous_rate: float | None
    change: float | None
    p_value: float | None
    test: str | None
    significant: bool
    direction: Direction

    @staticmethod
    def of(comparison: Comparison, previous_runs: int, previous_agent_runs: int) -> Trend:
        if comparison.change is None:
            direction: Direction = "none"
        elif previous_runs == 0 and comparison.rate:
            direction = "new"
        elif comparison.change > 0:
            direction = "up"
        elif comparison.change < 0:
            direction = "down"
        else:
            direction = "flat"
        return Trend(
            previous_runs,
            previous_agent_runs,
            comparison.previous_rate,
            comparison.change,
            comparison.p_value,
            comparison.test,
            comparison.significant,
            direction,
        )


@dataclass(frozen=True, slots=True)
class Pattern:
    """One failure pattern of the window (see the module docstring)."""

    agent: str | None
    kind: str
    tool: str | None
    parameter: str | None
    expected_tool: str | None
    severity: str
    issues: int
    runs: int
    error_runs: int
    agent_runs: int
    tool_calls: int | None
    examples: tuple[str, ...]
    source: Source = "issues"
    judged_runs: int = 0
    state_changing: bool = False
    trend: Trend | None = None
    values: tuple[tuple[str, int], ...] = ()
    """The most frequent offending values (the issues' ``actual``, JSON text) with their counts."""
    instead_of: tuple[tuple[str, int], ...] = ()
    """``hallucinated_tool``: the expected tools the invented name was called in place of, with run counts."""
    by_source: tuple[tuple[str, int], ...] = ()
    """``wrong_tool``: runs by evidence (expectation, judge, paired, inferred)."""

    @property
    def category(self) -> Category:
        return CATEGORY_OF.get(self.kind, Category.OUTCOME)

    @property
    def run_rate(self) -> float | None:
        return min(1.0, self.runs / self.agent_runs) if self.agent_runs else None

    @property
    def call_rate(self) -> float | None:
        if self.kind in _RUN_LEVEL_KINDS or not self.tool_calls:
            return None
        return self.issues / self.tool_calls

    @property
    def impact(self) -> float:
        warning_runs = max(0, self.runs - self.error_runs)
        weight = self.error_runs * SEVERITY_WEIGHT["error"] + warning_runs * SEVERITY_WEIGHT["warning"]
        return weight * (STATE_CHANGING_WEIGHT if self.state_changing else 1.0)

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """(agent, kind, tool, parameter, expected tool), ``''`` for None: stable across windows."""
        return (self.agent or "", self.kind, self.tool or "", self.parameter or "", self.expected_tool or "")

    def labels(self) -> dict[str, str]:
        """Label values for a Prometheus sample of this pattern (``''`` for None)."""
        agent, kind, tool, parameter, expected = self.key
        return {"agent": agent, "kind": kind, "tool": tool, "parameter": parameter, "expected_tool": expected}


@dataclass(frozen=True, slots=True)
class Confusion:
    """Runs of ``agent`` that called ``called`` where ``expected`` was expected, by evidence."""

    agent: str | None
    called: str
    expected: str
    runs: int
    by_source: tuple[tuple[str, int], ...]
    examples: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AgentSummary:
    """One agent over the window: runs, failed runs (a scored result that did not pass), their trend, per day."""

    agent: str | None
    runs: int
    failed_runs: int
    trend: Trend | None
    days: tuple[tuple[date, int, int], ...]
    """(day, runs, failed runs) for every day of the window."""

    @property
    def failure_rate(self) -> float | None:
        return self.failed_runs / self.runs if self.runs else None


@dataclass(frozen=True, slots=True)
class Analysis:
    """The failure analysis of one window against the previous one."""

    window: Window
    previous_window: Window
    runs: int
    failed_runs: int
    previous_runs: int
    previous_failed_runs: int
    failure_trend: Trend | None
    agents: list[AgentSummary]
    patterns: list[Pattern]
    """Every pattern, most impact first (ties: more runs, then the key)."""
    confusions: list[Confusion]
    category_runs: dict[tuple[str | None, str], int] = field(default_factory=dict)
    previous_category_runs: dict[tuple[str | None, str], int] = field(default_factory=dict)


# --------------------------------------------------------------------------- selection issues, run by run


@dataclass
class _Acc:
    runs: dict[tuple[str, str], tuple[datetime, bool, bool, str]] = field(default_factory=dict)
    issues: int = 0
    sources: Counter[str] = field(default_factory=Counter)
    instead_of: Counter[str] = field(default_factory=Counter)

    def add(self, issue: SelectionIssue, source: str = "issues", *, count_issue: bool = True) -> None:
        key = (issue.trace_id, issue.run_id)
        seen = self.runs.get(key)
        error = issue.severity == "error" or (seen is not None and seen[1])
        judged = issue.judge or (seen is not None and seen[2])
        latest = issue.scored_at if seen is None or issue.scored_at > seen[0] else seen[0]
        self.runs[key] = (latest, error, judged, issue.trace_id)
        if count_issue:
            self.issues += 1
        if seen is None:
            self.sources[source] += 1


def _examples(runs: Mapping[tuple[str, str], tuple[datetime, bool, bool, str]], k: int) -> tuple[str, ...]:
    ordered = sorted(runs.values(), key=lambda v: (-v[0].timestamp(), v[3]))
    out: list[str] = []
    for v in ordered:
        if v[3] not in out:
            out.append(v[3])
        if len(out) >= k:
            break
    return tuple(out)


def _selection(
    rows: Sequence[SelectionIssue], definitions: DefinitionIndex
) -> dict[tuple[str | None, str, str | None, str | None], _Acc]:
    """Selection issues resolved run by run into pattern accumulators keyed (agent, kind, tool, expected tool)."""
    by_run: dict[tuple[str, str], list[SelectionIssue]] = defaultdict(list)
    for row in rows:
        by_run[(row.trace_id, row.run_id)].append(row)
    acc: dict[tuple[str | None, str, str | None, str | None], _Acc] = defaultdict(_Acc)
    for key in sorted(by_run):
        issues = sorted(by_run[key], key=lambda i: (i.call_index is None, i.call_index or 0, i.kind, i.tool or ""))
        agent = issues[0].agent
        called = issues[0].called
        offered = definitions.offered(agent)
        invented = {i.tool for i in issues if i.kind == "hallucinated_tool" and i.tool}
        if offered:
            invented |= {name for name in called if name not in offered}
        covered: set[str] = set()
        for i in issues:
            if i.kind == "wrong_tool" and i.tool and i.expected_tool:
                acc[(agent, "wrong_tool", i.tool, i.expected_tool)].add(i, "judge" if i.judge else "expectation")
                covered.add(i.expected_tool)
        missing: list[SelectionIssue] = []
        for i in issues:
            if (
                i.kind == "missing_tool"
                and i.tool
                and i.tool not in covered
                and i.tool not in {m.tool for m in missing}
            ):
                missing.append(i)
        extras = [i for i in issues if i.kind in ("unnecessary_tool", "forbidden_tool") and i.tool not in invented]
        paired_extra: set[int] = set()
        used: set[str] = set()
        remaining: list[SelectionIssue] = []
        for m in missing:
            partner = next(
                (j for j, x in enumerate(extras) if j not in paired_extra and x.tool != m.tool and x.tool not in used),
                None,
            )
            if partner is None:
                remaining.append(m)
                continue
            paired_extra.add(partner)
            x = extras[partner]
            assert x.tool is not None and m.tool is not None
            used.add(x.tool)
            acc[(agent, "wrong_tool", x.tool, m.tool)].add(m, "judge" if m.judge or x.judge else "paired")
        missing_names = {m.tool for m in missing}
        candidates = [
            n for n in dict.fromkeys(called) if n not in missing_names and n not in invented and n not in used
        ]
        for m in remaining:
            assert m.tool is not None
            if m.tool in called:
                acc[(agent, "missing_tool", m.tool, None)].add(m)
                continue
            if candidates:
                x_name = candidates.pop(0)
                acc[(agent, "wrong_tool", x_name, m.tool)].add(m, "judge" if m.judge else "inferred")
                continue
            fake = next((n for n in called if n in invented), None)
            if fake is not None:
                target = acc[(agent, "hallucinated_tool", fake, None)]
                target.instead_of[m.tool] += 1
                reported = any(i.kind == "hallucinated_tool" and i.tool == fake for i in issues)
                target.add(m, count_issue=not reported)
                continue
            acc[(agent, "missing_tool", m.tool, None)].add(m)
        for j, x in enumerate(extras):
            if x.kind == "unnecessary_tool" and j in paired_extra:
                continue  # counted as the confusion it is part of
            acc[(agent, x.kind, x.tool, None)].add(x)
        for i in issues:
            if i.kind == "hallucinated_tool":
                acc[(agent, "hallucinated_tool", i.tool, None)].add(i)
    return acc


# --------------------------------------------------------------------------- patterns


def find_patterns(data: WindowData, definitions: DefinitionIndex | None = None, *, examples: int = 3) -> list[Pattern]:
    """The patterns of one window, without trends, most impact first."""
    index = definitions or DefinitionIndex(())
    agent_runs = data.agent_runs
    calls = data.tool_calls
    values: dict[tuple[str | None, str, str | None, str | None], list[tuple[str, int]]] = defaultdict(list)
    for v in data.values:
        values[(v.agent, v.kind, v.tool, v.parameter)].append((v.value, v.issues))
    patterns: list[Pattern] = []

    def changing(agent: str | None, tool: str | None) -> bool:
        return tool is not None and state_changing(tool, index.get(agent, tool))

    for g in data.issue_groups:
        top = sorted(values.get((g.agent, g.kind, g.tool, g.parameter), ()), key=lambda v: (-v[1], v[0]))[:3]
        patterns.append(
            Pattern(
                agent=g.agent,
                kind=g.kind,
                tool=g.tool,
                parameter=g.parameter,
                expected_tool=None,
                severity="error" if g.error_runs else "warning",
                issues=g.issues,
                runs=g.runs,
                error_runs=g.error_runs,
                agent_runs=agent_runs.get(g.agent, 0),
                tool_calls=calls.get((g.agent, g.tool)) if g.tool is not None else None,
                examples=g.examples[:examples],
                judged_runs=g.judged_runs,
                state_changing=changing(g.agent, g.tool),
                values=tuple(top),
            )
        )
    for (agent, kind, tool, expected), a in _selection(data.selection, index).items():
        if not a.runs:
            continue
        runs = len(a.runs)
        error_runs = sum(1 for v in a.runs.values() if v[1])
        sources = tuple(sorted(a.sources.items(), key=lambda s: (-s[1], s[0])))
        if kind == "wrong_tool":
            strongest: tuple[Source, ...] = ("expectation", "judge", "paired", "inferred")
            source: Source = next((s for s in strongest if a.sources.get(s)), "inferred")
        else:
            source = "issues"
        patterns.append(
            Pattern(
                agent=agent,
                kind=kind,
                tool=tool,
                parameter=None,
                expected_tool=expected,
                severity="error" if error_runs else "warning",
                issues=a.issues,
                runs=runs,
                error_runs=error_runs,
                agent_runs=agent_runs.get(agent, 0),
                tool_calls=calls.get((agent, tool)) if tool is not None else None,
                examples=_examples(a.runs, examples),
                source=source,
                judged_runs=sum(1 for v in a.runs.values() if v[2]),
                state_changing=changing(agent, tool),
                values=tuple(sorted(values.get((agent, kind, tool, None), ()), key=lambda v: (-v[1], v[0]))[:3]),
                instead_of=tuple(sorted(a.instead_of.items(), key=lambda s: (-s[1], s[0]))),
                by_source=sources if kind == "wrong_tool" else (),
            )
        )
    patterns.sort(key=_rank)
    return patterns


def _rank(p: Pattern) -> tuple[float, int, int, tuple[str, ...]]:
    return (-p.impact, -p.runs, -p.issues, p.key)


def find_confusions(patterns: Iterable[Pattern]) -> list[Confusion]:
    """The ``wrong_tool`` patterns as confusion cells, most runs first."""
    out = [
        Confusion(p.agent, p.tool or "", p.expected_tool or "", p.runs, p.by_source, p.examples)
        for p in patterns
        if p.kind == "wrong_tool" and p.tool and p.expected_tool
    ]
    out.sort(key=lambda c: (-c.runs, c.agent or "", c.called, c.expected))
    return out


def _with_trend(
    p: Pattern, previous: Mapping[tuple[str, str, str, str, str], Pattern], prev_agent_runs: int, alpha: float
) -> Pattern:
    before = previous.get(p.key)
    x0 = before.runs if before else 0
    if p.agent_runs <= 0 or prev_agent_runs <= 0:
        trend = Trend.of(Comparison(p.run_rate, None, None, None, None, False), x0, prev_agent_runs)
    else:
        trend = Trend.of(compare(p.runs, p.agent_runs, x0, prev_agent_runs, alpha), x0, prev_agent_runs)
    return replace(p, trend=trend)


def analyze(
    current: WindowData,
    previous: WindowData | None,
    definitions: DefinitionIndex | None = None,
    *,
    significance: float = 0.05,
    examples: int = 3,
) -> Analysis:
    """Patterns, confusions and agent summaries of ``current``, each compared with ``previous`` (the window of the
    same length before it; None: no comparison)."""
    index = definitions or DefinitionIndex(())
    prev = previous or WindowData(current.window.previous())
    patterns = find_patterns(current, index, examples=examples)
    before = {p.key: p for p in find_patterns(prev, index, examples=0)} if previous is not None else {}
    prev_agent_runs = prev.agent_runs
    if previous is not None:
        patterns = [_with_trend(p, before, prev_agent_runs.get(p.agent, 0), significance) for p in patterns]
    days = current.window.days
    per_day: dict[str | None, dict[date, tuple[int, int]]] = defaultdict(dict)
    for d in current.agent_days:
        runs, failed = per_day[d.agent].get(d.day, (0, 0))
        per_day[d.agent][d.day] = (runs + d.runs, failed + d.failed_runs)
    prev_failed: dict[str | None, int] = defaultdict(int)
    for d in prev.agent_days:
        prev_failed[d.agent] += d.failed_runs
    agents: list[AgentSummary] = []
    for agent, by_day in per_day.items():
        runs = sum(r for r, _ in by_day.values())
        failed = sum(f for _, f in by_day.values())
        trend = None
        if previous is not None:
            n0 = prev_agent_runs.get(agent, 0)
            comparison = (
                compare(failed, runs, prev_failed[agent], n0, significance)
                if runs and n0
                else Comparison(failed / runs if runs else None, None, None, None, None, False)
            )
            trend = Trend.of(comparison, prev_failed[agent], n0)
        series = tuple((day, *by_day.get(day, (0, 0))) for day in days)
        agents.append(AgentSummary(agent, runs, failed, trend, series))
    agents.sort(key=lambda a: (-a.runs, a.agent is None, a.agent or ""))
    failure_trend = None
    if previous is not None:
        comparison = (
            compare(current.failed_runs, current.runs, prev.failed_runs, prev.runs, significance)
            if current.runs and prev.runs
            else Comparison(current.failed_runs / current.runs if current.runs else None, None, None, None, None, False)
        )
        failure_trend = Trend.of(comparison, prev.failed_runs, prev.runs)
    patterns.sort(key=_rank)
    return Analysis(
        window=current.window,
        previous_window=prev.window,
        runs=current.runs,
        failed_runs=current.failed_runs,
        previous_runs=prev.runs,
        previous_failed_runs=prev.failed_runs,
        failure_trend=failure_trend,
        agents=agents,
        patterns=patterns,
        confusions=find_confusions(patterns),
        category_runs=dict(current.category_runs),
        previous_category_runs=dict(prev.category_runs),
    )


def active_patterns(patterns: Iterable[Pattern], limit: int, *, min_runs: int = 1) -> list[Pattern]:
    """The patterns to export as a bounded Prometheus gauge: at most ``limit``, each with at least ``min_runs`` runs
    hurt, most impact first (ties: more runs, then the key, so the set is stable between refreshes).

    Meant for the daemon's refresh (every ``report.patterns_refresh_s``, over the last ``report.patterns_window_s``,
    ``limit = report.max_active_patterns``, ``min_runs = report.min_runs``)::

        data = monitor.store.failures.load_window(store, since, until)
        defs = DefinitionIndex(monitor.store.failures.tool_definitions(store))
        for p in active_patterns(find_patterns(data, defs), settings.report.max_active_patterns,
                                 min_runs=settings.report.min_runs):
            gauge.labels(**p.labels()).set(p.runs)

    The label set of :meth:`Pattern.labels` (agent, kind, tool, parameter, expected_tool) has at most ``limit``
    combinations per refresh; clear the gauge before setting it so patterns that went away disappear.
    """
    if limit <= 0:
        return []
    kept = [p for p in patterns if p.runs >= min_runs]
    kept.sort(key=_rank)
    return kept[:limit]
