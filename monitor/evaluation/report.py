"""Evaluation reports: ScoreResult ↔ JSON, the ``--report`` JSON document, ``--junit`` XML, baselines.

* :func:`result_to_json` writes every field of SCORING.md §5.1 (issues as §5.2, ``judge`` usage or
  null); :func:`result_from_json` reads it back (they round-trip).
* :func:`report_json` — ``{"format": "monitor.eval-report/v1", "exit_code", "summary", "cases",
  "results"}``: ``summary`` has the totals, the pass rate as an exact fraction string
  (``"17/20"``) and as a float, per-dataset gates and ``scorers`` (per dataset and scorer: mean,
  pass rate, counts, ``min_mean``), and the baseline ``regressions``; ``results`` every ScoreResult.
* :func:`junit_xml` — one ``testsuite`` per dataset, one ``testcase`` per case; a failed case carries
  a ``failure`` (an errored one an ``error``) whose message names the failing scorers and their
  first issue, and whose text lists the first issues of each.
* :func:`load_baseline` — ``(dataset, scorer) → mean`` from an earlier ``--report`` file.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from monitor.evaluation.gate import CaseVerdict, PairVerdict, SuiteVerdict
from monitor.scoring.result import FailureKind, Issue, JudgeUsage, NoteKind, ScoreResult, Severity

__all__ = [
    "REPORT_FORMAT",
    "BaselineError",
    "bound_text",
    "describe_issue",
    "junit_xml",
    "load_baseline",
    "report_json",
    "result_from_json",
    "result_to_json",
    "score_text",
]

REPORT_FORMAT = "monitor.eval-report/v1"
FIRST_ISSUES = 3


def _judge_json(judge: JudgeUsage | None) -> dict[str, Any] | None:
    if judge is None:
        return None
    return {
        "model": judge.model,
        "input_tokens": judge.input_tokens,
        "cache_creation_input_tokens": judge.cache_creation_input_tokens,
        "cache_read_input_tokens": judge.cache_read_input_tokens,
        "output_tokens": judge.output_tokens,
        "requests": judge.requests,
        "batch": judge.batch,
        "cost_usd": judge.cost_usd,
        "latency_ms": judge.latency_ms,
    }


def result_to_json(result: ScoreResult) -> dict[str, Any]:
    """Every §5.1 field of a result as JSON-ready values (offline fields included)."""
    return {
        "scorer": result.scorer,
        "scorer_kind": result.scorer_kind,
        "scorer_version": result.scorer_version,
        "params": result.params,
        "params_hash": result.params_hash,
        "trace_id": result.trace_id,
        "run_id": result.run_id,
        "agent": result.agent,
        "conversation_id": result.conversation_id,
        "case_id": result.case_id,
        "turn": result.turn,
        "run_no": result.run_no,
        "status": result.status,
        "score": result.score,
        "threshold": result.threshold,
        "passed": result.passed,
        "reason": result.reason,
        "degraded": result.degraded,
        "issues": [i.to_json() for i in result.issues],
        "details": result.details,
        "judge": _judge_json(result.judge),
        "scored_at": result.scored_at,
    }


def _issue_from_json(obj: Mapping[str, Any]) -> Issue:
    kind_text = obj["kind"]
    kind: FailureKind | NoteKind = (
        FailureKind(kind_text) if kind_text in FailureKind._value2member_map_ else NoteKind(kind_text)
    )
    return Issue(
        kind=kind,
        severity=Severity(obj.get("severity", "error")),
        tool=obj.get("tool"),
        parameter=obj.get("parameter"),
        call_index=obj.get("call_index"),
        call_id=obj.get("call_id"),
        expected=obj.get("expected"),
        actual=obj.get("actual"),
        detail=obj.get("detail"),
        turn=obj.get("turn"),
    )


def result_from_json(obj: Mapping[str, Any]) -> ScoreResult:
    """The inverse of :func:`result_to_json`."""
    judge = obj.get("judge")
    return ScoreResult(
        scorer=obj["scorer"],
        scorer_kind=obj["scorer_kind"],
        scorer_version=int(obj["scorer_version"]),
        status=obj["status"],
        score=obj.get("score"),
        threshold=obj.get("threshold"),
        passed=obj.get("passed"),
        reason=obj.get("reason"),
        degraded=obj.get("degraded"),
        issues=tuple(_issue_from_json(i) for i in obj.get("issues", ())),
        details=dict(obj.get("details") or {}),
        params=dict(obj.get("params") or {}),
        params_hash=obj.get("params_hash", ""),
        judge=None if judge is None else JudgeUsage(**judge),
        trace_id=obj.get("trace_id"),
        run_id=obj.get("run_id"),
        agent=obj.get("agent"),
        conversation_id=obj.get("conversation_id"),
        case_id=obj.get("case_id"),
        turn=obj.get("turn"),
        run_no=obj.get("run_no"),
        scored_at=obj.get("scored_at"),
    )


# ----------------------------------------------------------------------------- text of issues


def _short(value: Any, limit: int = 80) -> str:
    """``value`` as JSON (a string quoted: ``"42"`` and ``42`` differ), cut to ``limit`` characters."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def score_text(value: float, bound: float | None = None, *, digits: int = 3) -> str:
    """``value`` with ``digits`` significant digits, more when needed so that the shown number is on
    the same side of ``bound`` as ``value`` (a 0.7999 below a 0.8 threshold shows as ``0.7999``, never
    ``0.8``); the exact ``repr`` as the last resort."""
    for precision in range(digits, 18):
        text = f"{value:.{precision}g}"
        if bound is None or (float(text) >= bound) == (value >= bound):
            return text
    return repr(value)


def bound_text(value: float) -> str:
    """A threshold or bound as written: ``0.8``, ``1``; never rounded (``0.66666667`` stays)."""
    text = f"{value:g}"
    return text if float(text) == value else repr(value)


def describe_issue(issue: Issue) -> str:
    """One line: ``kind tool.parameter (expected X, got Y)``, with the turn when set; X and Y are JSON
    (``"42"`` is the string, ``42`` the number)."""
    where = issue.tool or ""
    if issue.parameter:
        where += issue.parameter if issue.parameter.startswith("/") else f".{issue.parameter}"
    text = str(issue.kind) + (f" {where}" if where else "")
    if isinstance(issue.detail, Mapping) and "expected_tool" in issue.detail:
        text += f" (expected {issue.detail['expected_tool']})"
    elif issue.expected is not None or issue.actual is not None:
        text += f" (expected {_short(issue.expected)}, got {_short(issue.actual)})"
    elif isinstance(issue.detail, str) and issue.detail:
        text += f": {_short(issue.detail)}"
    if issue.turn is not None:
        text += f" [turn {issue.turn}]"
    return text


def pair_text(pair: PairVerdict) -> str:
    """``scorer 0.5<1: first issue`` / ``scorer error: reason``. The score shows as many digits as it
    takes to stay on its side of the threshold (:func:`score_text`); the threshold is shown exactly."""
    if pair.status == "errored":
        return f"{pair.scorer} error: {pair.reason}"
    if pair.score is None:
        return f"{pair.scorer} required but {pair.reason or 'not applicable'}"
    head = f"{pair.scorer} {score_text(pair.score, pair.threshold)}"
    if pair.aggregate == "all":
        head += " (not every run passed)"
    elif pair.threshold is not None:
        head += f"<{bound_text(pair.threshold)}"
    if pair.issues:
        head += f": {describe_issue(pair.issues[0])}"
    return head


# ----------------------------------------------------------------------------- the JSON report


def _rate(passed: int, failed: int) -> dict[str, Any]:
    """``pass_rate`` as the unreduced fraction ``"passed/(passed+failed)"`` and its float value."""
    total = passed + failed
    if total == 0:
        return {"pass_rate": None, "pass_rate_value": None}
    return {"pass_rate": f"{passed}/{total}", "pass_rate_value": float(Fraction(passed, total))}


def _pair_json(pair: PairVerdict) -> dict[str, Any]:
    return {
        "status": pair.status,
        "gated": pair.gated,
        "score": pair.score,
        "threshold": pair.threshold,
        "aggregate": pair.aggregate,
        "scored": pair.scored,
        "errors": pair.errors,
        "reason": pair.reason,
        "issues": [i.to_json() for i in pair.issues[:FIRST_ISSUES]],
    }


def _case_json(case: CaseVerdict) -> dict[str, Any]:
    return {
        "dataset": case.dataset,
        "case_id": case.case_id,
        "status": case.status,
        "failing_scorers": [p.scorer for p in case.failing],
        "scorers": {sid: _pair_json(p) for sid, p in case.pairs.items()},
        "info": dict(case.info),
    }


def report_json(suite: SuiteVerdict, *, created_at: str | None = None) -> dict[str, Any]:
    """The ``--report`` document (see the module docstring)."""
    datasets = []
    scorers = []
    for d in suite.datasets:
        datasets.append(
            {
                "name": d.name,
                "source": d.source,
                "file": d.file,
                "passed": d.passed,
                "failed": d.failed,
                "errored": d.errored,
                **_rate(d.passed, d.failed),
                "min_pass_rate": d.gate.min_pass_rate,
                "pass_rate_rounding": d.gate.pass_rate_rounding,
                "allow_errors": d.gate.allow_errors,
                "pass_rate_ok": d.rate_ok,
                "min_mean_ok": d.min_mean_ok,
                "suite_passed": d.suite_passed,
                "cannot_run": list(d.cannot_run),
            }
        )
        for s in d.scorers:
            scorers.append(
                {
                    "dataset": s.dataset,
                    "scorer": s.scorer,
                    "kind": s.kind,
                    "gated": s.gated,
                    "mean": s.mean,
                    **_rate(s.passed, s.failed),
                    "passed": s.passed,
                    "failed": s.failed,
                    "errored": s.errored,
                    "not_applicable": s.not_applicable,
                    "min_mean": s.min_mean,
                    "min_mean_ok": s.min_mean_ok,
                }
            )
    return {
        "format": REPORT_FORMAT,
        "created_at": created_at,
        "exit_code": suite.exit_code,
        "summary": {
            "passed": suite.passed,
            "failed": suite.failed,
            "errored": suite.errored,
            "total": suite.passed + suite.failed + suite.errored,
            **_rate(suite.passed, suite.failed),
            "suite_passed": suite.suite_passed,
            "datasets": datasets,
            "scorers": scorers,
            "regressions": [
                {
                    "dataset": r.dataset,
                    "scorer": r.scorer,
                    "baseline": r.baseline,
                    "current": r.current,
                    "tolerance": r.tolerance,
                }
                for r in suite.regressions
            ],
        },
        "cases": [_case_json(c) for d in suite.datasets for c in d.cases],
        "results": [result_to_json(r) for d in suite.datasets for c in d.cases for r in c.results],
    }


# ----------------------------------------------------------------------------- JUnit XML


def _issues_text(pairs: Sequence[PairVerdict]) -> str:
    lines: list[str] = []
    for p in pairs:
        lines.append(pair_text(p))
        lines.extend(f"  - {describe_issue(i)}" for i in p.issues[:FIRST_ISSUES])
    return "\n".join(lines)


def junit_xml(suite: SuiteVerdict) -> bytes:
    """JUnit XML (``xml.etree``): one ``testsuite`` per dataset, one ``testcase`` per case."""
    root = ET.Element(
        "testsuites",
        name="monitor eval",
        tests=str(sum(len(d.cases) for d in suite.datasets)),
        failures=str(suite.failed),
        errors=str(suite.errored),
    )
    for d in suite.datasets:
        ts = ET.SubElement(
            root,
            "testsuite",
            name=d.name,
            tests=str(len(d.cases)),
            failures=str(d.failed),
            errors=str(d.errored),
            file=d.file,
        )
        if d.scorers:
            props = ET.SubElement(ts, "properties")
            for s in d.scorers:
                value = "" if s.mean is None else f"{s.mean:.6g}"
                ET.SubElement(props, "property", name=f"mean.{s.scorer}", value=value)
        for c in d.cases:
            tc = ET.SubElement(ts, "testcase", classname=f"{d.source}.{d.name}", name=c.case_id, file=d.file)
            failing = c.failing
            if c.status == "passed":
                continue
            tag = "failure" if c.status == "failed" else "error"
            first = next(p for p in failing if (p.status == "failed") == (c.status == "failed"))
            el = ET.SubElement(tc, tag, message=pair_text(first), type=first.status)
            el.text = _issues_text(failing)
    if suite.regressions:
        ts = ET.SubElement(
            root,
            "testsuite",
            name="baseline",
            tests=str(len(suite.regressions)),
            failures=str(len(suite.regressions)),
            errors="0",
        )
        for r in suite.regressions:
            tc = ET.SubElement(ts, "testcase", classname="baseline", name=f"{r.dataset}.{r.scorer}")
            ET.SubElement(
                tc,
                "failure",
                type="regression",
                message=f"mean {r.current:.4g} < baseline {r.baseline:.4g} - tolerance {r.tolerance:g}",
            )
    ET.indent(root)
    return bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True))


# ----------------------------------------------------------------------------- baseline


class BaselineError(ValueError):
    """A baseline report that cannot be read (exit 2)."""


def load_baseline(path: Path) -> dict[tuple[str, str], float]:
    """``(dataset, scorer) → mean`` from an earlier ``--report`` file (scorers without a mean are skipped)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from None
    if not isinstance(doc, Mapping) or doc.get("format") != REPORT_FORMAT:
        raise BaselineError(f"{path}: not a monitor eval report (expected format {REPORT_FORMAT!r})")
    out: dict[tuple[str, str], float] = {}
    for i, s in enumerate(doc.get("summary", {}).get("scorers", [])):
        try:
            if s.get("mean") is not None:
                out[(str(s["dataset"]), str(s["scorer"]))] = float(s["mean"])
        except (KeyError, TypeError, ValueError, AttributeError):
            raise BaselineError(f"{path}: $.summary.scorers[{i}]: expected {{dataset, scorer, mean}}") from None
    return out
