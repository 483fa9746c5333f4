"""The alert rules of ``deploy/prometheus/``: promtool checks and unit-tests them, the checked-in file is the
generator's output, every alert carries its annotations and runbook section and is unit-tested on both sides of
its thresholds and of its ``for:``, and the rules read only metrics the daemon exports.

Real parts: ``promtool`` of the Debian ``prometheus`` package (``make system-deps``); a missing binary fails.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Final

import jsonschema
import pytest
import yaml

from monitor.export.metrics import Metrics
from monitor.settings import MetricsSettings
from tests.deploy.conftest import PROMETHEUS_DIR
from tests.support.prometheus import require_binary

RULES: Final = PROMETHEUS_DIR / "rules.yaml"
RUNBOOK: Final = PROMETHEUS_DIR / "runbook.md"
UNIT_TESTS: Final = sorted((PROMETHEUS_DIR / "tests").glob("*.yaml"))
ANNOTATIONS: Final = ("summary", "description", "dashboard", "runbook_url")
SEVERITIES: Final = ("critical", "warning")
E2E_SCALE: Final = 1 / 120


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [require_binary("promtool"), *args], capture_output=True, text=True, timeout=300, cwd=cwd, check=False
    )


def rules_doc() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(RULES.read_text())
    return doc


def alert_rules() -> list[dict[str, Any]]:
    return [r for g in rules_doc()["groups"] for r in g["rules"] if "alert" in r]


def alert_names() -> list[str]:
    return [r["alert"] for r in alert_rules()]


def github_anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def runbook_headings() -> dict[str, str]:
    """``## `` headings of runbook.md by anchor."""
    return {
        github_anchor(m.group(1)): m.group(1).strip()
        for m in re.finditer(r"^## (.+)$", RUNBOOK.read_text(), flags=re.MULTILINE)
    }


# ---------------------------------------------------------------------------------------------- promtool


def test_promtool_check_rules() -> None:
    proc = promtool("check", "rules", str(RULES))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    n = sum(len(g["rules"]) for g in rules_doc()["groups"])
    assert f"SUCCESS: {n} rules found" in proc.stdout, proc.stdout


@pytest.mark.parametrize("path", UNIT_TESTS, ids=[p.name for p in UNIT_TESTS])
def test_promtool_unit_tests(path: Path) -> None:
    proc = promtool("test", "rules", path.name, cwd=path.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout and "FAILED" not in proc.stdout + proc.stderr, proc.stdout


def test_promtool_unit_tests_catch_a_changed_threshold(rules_generator: ModuleType, tmp_path: Path) -> None:
    """Guard against vacuous tests: the same unit tests against rules rendered with other thresholds fail."""
    opts = rules_generator.Options
    mutants = [
        ("pipeline.yaml", opts(lag_records=12000)),
        ("pipeline.yaml", opts(record_to_result_p99_seconds=15)),
        ("pipeline.yaml", opts(min_traces_per_hour=500)),
        ("pipeline.yaml", opts(unrecognized_span_ratio=0.02)),
        ("pipeline.yaml", opts(min_spans_per_hour=400)),
        ("judges.yaml", opts(judge_error_ratio=0.45)),
        ("quality.yaml", opts(pass_rate_drop=0.05)),
        ("tool_selection.yaml", opts(min_runs_per_hour=40)),
        ("tool_selection_fast_burn.yaml", opts(objective=0.94)),
    ]

    def run(item: tuple[int, tuple[str, Any]]) -> tuple[str, Any, subprocess.CompletedProcess[str]]:
        i, (name, options) = item
        workdir = tmp_path / f"{i}-{name.removesuffix('.yaml')}"
        (workdir / "tests").mkdir(parents=True)
        (workdir / "rules.yaml").write_text(rules_generator.render(options))
        shutil.copy(PROMETHEUS_DIR / "tests" / name, workdir / "tests" / name)
        return name, options, promtool("test", "rules", name, cwd=workdir / "tests")

    with ThreadPoolExecutor(len(mutants)) as pool:
        for name, options, proc in pool.map(run, enumerate(mutants)):
            assert proc.returncode != 0 and "FAILED" in proc.stdout + proc.stderr, f"{name} passed: {options}"


def test_promtool_checks_the_scaled_rules_of_the_end_to_end_test(rules_generator: ModuleType, tmp_path: Path) -> None:
    scaled = tmp_path / "rules.yaml"
    scaled.write_text(rules_generator.render(rules_generator.Options(scale=E2E_SCALE)))
    proc = promtool("check", "rules", str(scaled))
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---------------------------------------------------------------------------------------------- generated


def test_checked_in_rules_are_the_generators_output(rules_generator: ModuleType) -> None:
    assert RULES.read_text() == rules_generator.render(), (
        "deploy/prometheus/rules.yaml differs from the generator's output: run python deploy/prometheus/generate.py"
    )


def test_generator_check_mode(tmp_path: Path, rules_generator: ModuleType) -> None:
    assert rules_generator.main(["--check"]) == 0
    other = tmp_path / "rules.yaml"
    other.write_text(rules_generator.render(rules_generator.Options(objective=0.9)))
    assert "# Options: objective=0.9." in other.read_text()
    assert rules_generator.main(["--check", "--output", str(other)]) == 1
    assert rules_generator.main(["--check", "--output", str(other), "--objective", "0.9"]) == 0
    assert rules_generator.main(["--check", "--output", str(tmp_path / "missing.yaml")]) == 1


def test_scale_changes_durations_only(rules_generator: ModuleType) -> None:
    """The end-to-end test runs the shipped rules, only faster: same rules, same thresholds, other durations."""
    gen = rules_generator
    full = yaml.safe_load(gen.render())
    fast = yaml.safe_load(gen.render(gen.Options(scale=E2E_SCALE)))
    duration = re.compile(r"\b\d+(?:d|h|m|s|ms)(?:\d+(?:h|m|s|ms))*\b")
    # the "per hour" volume floors and counts: the seconds of an hour
    per_hour = re.compile(r"\* (?:3600|30)\b")

    def shape(doc: dict[str, Any]) -> list[Any]:
        out = []
        for group in doc["groups"]:
            for rule in group["rules"]:
                expr = per_hour.sub("* HOUR", duration.sub("D", rule["expr"]))
                expr = re.sub(r"(timestamp_seconds\)) > [\d.]+", r"\1 > SECONDS", expr)  # the commit-age threshold
                ann = {k: per_hour.sub("* HOUR", duration.sub("D", v)) for k, v in rule.get("annotations", {}).items()}
                out.append((rule.get("alert") or rule.get("record"), expr, rule.get("labels"), ann))
        return out

    assert shape(full) == shape(fast)
    fast_alert = {r["alert"]: r for r in gen.alerts(gen.render(gen.Options(scale=E2E_SCALE)))}
    assert fast_alert["ToolSelectionErrorsAboveBaseline"]["for"] == "7s500ms"
    assert "[1h24m] offset 30s" in gen.render(gen.Options(scale=E2E_SCALE))


def test_options_change_the_objective_per_agent(rules_generator: ModuleType, tmp_path: Path) -> None:
    gen = rules_generator
    text = gen.render(gen.Options(objective=0.99, agent_objectives={"checkout": 0.999}, labels={"team": "ml"}))
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    assert promtool("check", "rules", str(path)).returncode == 0
    doc = yaml.safe_load(text)
    records = {r["record"]: r["expr"] for g in doc["groups"] for r in g["rules"] if "record" in r}
    assert records["monitor:tool_selection_slo:objective_ratio"] == "vector(0.99)"
    assert (
        'label_replace(vector(0.999), "agent", "checkout", "", "")'
        in records["agent:monitor_tool_selection_slo:objective_ratio"]
    )
    assert all(a["labels"]["team"] == "ml" for a in gen.alerts(text))
    with pytest.raises(ValueError):
        gen.Options(objective=1.0)


def test_per_agent_objective_evaluates(rules_generator: ModuleType, tmp_path: Path) -> None:
    """The override recording joins as intended (promtool evaluates it): checkout 99.9 %, the rest the default."""
    gen = rules_generator
    (tmp_path / "rules.yaml").write_text(gen.render(gen.Options(agent_objectives={"checkout": 0.999})))
    series = 'monitor_runs_scored_total{{job="agent-tool-monitor", instance="m-0:9464", agent="{}"}}'
    test = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": series.format(agent), "values": "0+10x10"} for agent in ("checkout", "search")
                ],
                "promql_expr_test": [
                    {
                        "expr": "agent:monitor_tool_selection_slo:objective_ratio",
                        "eval_time": "5m",
                        "exp_samples": [
                            {
                                "labels": 'agent:monitor_tool_selection_slo:objective_ratio{agent="checkout"}',
                                "value": 0.999,
                            },
                            {
                                "labels": 'agent:monitor_tool_selection_slo:objective_ratio{agent="search"}',
                                "value": 0.95,
                            },
                        ],
                    }
                ],
            }
        ],
    }
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(test))
    proc = promtool("test", "rules", "test.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_prometheus_rule_manifest(rules_generator: ModuleType, tmp_path: Path) -> None:
    """``--prometheus-rule``: the same groups in a PrometheusRule, valid against the operator's CRD schema."""
    out = tmp_path / "rule.yaml"
    args = ["--prometheus-rule", "agent-tool-monitor", "--namespace", "monitoring", "--rule-label", "release=kps"]
    assert rules_generator.main([*args, "--output", str(out)]) == 0
    doc = yaml.safe_load(out.read_text())
    assert (doc["apiVersion"], doc["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert doc["metadata"]["namespace"] == "monitoring" and doc["metadata"]["labels"]["release"] == "kps"
    assert doc["spec"]["groups"] == rules_doc()["groups"]
    schema = PROMETHEUS_DIR.parents[1] / "tests" / "deploy" / "schemas" / "prometheusrule.json"
    if schema.is_file():
        crd = json.loads(schema.read_text())["openAPIV3Schema"]
        jsonschema.Draft7Validator(crd).validate(doc)
    assert rules_generator.main(["--namespace", "x", "--output", str(out)]) == 2


# ---------------------------------------------------------------------------------------------- every alert


def test_every_alert_has_severity_annotations_and_a_runbook_section() -> None:
    headings = runbook_headings()
    for rule in alert_rules():
        name = rule["alert"]
        assert rule["labels"]["severity"] in SEVERITIES, name
        assert rule.get("for"), f"{name} has no for:"
        for key in ANNOTATIONS:
            assert rule["annotations"].get(key), f"{name} has no {key} annotation"
        url = rule["annotations"]["runbook_url"]
        page, _, anchor = url.partition("#")
        assert page.endswith("deploy/prometheus/runbook.md"), url
        assert anchor in headings and headings[anchor] == name, f"{name}: runbook.md has no section #{anchor}"
        assert "/d/atm-" in rule["annotations"]["dashboard"], name


def test_runbook_has_a_section_for_alerts_that_exist_only() -> None:
    """Alert-named sections (a single CamelCase word) match the alerts one to one."""
    sections = {h for h in runbook_headings().values() if re.fullmatch(r"[A-Z][A-Za-z]+", h)}
    assert sections == set(alert_names())


def test_dashboard_links_point_at_the_shipped_dashboards(rules_generator: ModuleType) -> None:
    dashboards = PROMETHEUS_DIR.parents[1] / "dashboards"
    uids = {yaml.safe_load(p.read_text())["uid"] for p in dashboards.glob("*.json")}
    linked = set(rules_generator.DASHBOARDS.values())
    assert uids, "dashboards/*.json are missing: run dashboards/generate.py"
    assert linked <= uids, f"alerts link to dashboards {linked - uids} that dashboards/ does not have"


@dataclass
class Cases:
    firing: list[tuple[str, str]]  # (file, eval_time)
    pending: list[tuple[str, str]]
    silent: list[tuple[str, str]]


def unit_test_cases() -> dict[str, Cases]:
    """Per alert, where the unit tests show it firing, pending (and not firing at that time), and silent.

    * firing: an ``alert_rule_test`` expecting alerts;
    * pending: a ``promql_expr_test`` on ``ALERTS{alertname=X, alertstate="pending"}`` with samples, none of which
      is among the firing alerts the same group's ``alert_rule_test`` expects at that time (the ``for:`` side);
    * silent: a ``promql_expr_test`` on ``ALERTS{alertname=X…}`` (any state, or over a range) expecting nothing:
      an input below a threshold (never pending).
    """
    cases: dict[str, Cases] = {}

    def get(name: str) -> Cases:
        return cases.setdefault(name, Cases([], [], []))

    for path in UNIT_TESTS:
        doc = yaml.safe_load(path.read_text())
        for group in doc["tests"]:
            expected: dict[tuple[str, str], list[dict[str, str]]] = {}
            for t in group.get("alert_rule_test", []):
                alert_labels = [dict(a.get("exp_labels", {})) for a in t.get("exp_alerts") or []]
                expected.setdefault((t["alertname"], str(t["eval_time"])), []).extend(alert_labels)
                if alert_labels:
                    get(t["alertname"]).firing.append((path.name, str(t["eval_time"])))
            for t in group.get("promql_expr_test", []):
                m = re.search(r'ALERTS\{alertname="(\w+)"', t["expr"])
                if not m:
                    continue
                name, when = m.group(1), str(t["eval_time"])
                samples = t.get("exp_samples") or []
                if not samples:
                    get(name).silent.append((path.name, when))
                elif 'alertstate="pending"' in t["expr"]:
                    firing = expected.get((name, when))
                    assert firing is not None, f"{path.name}: pending check of {name} at {when} has no alert test"
                    for sample in samples:
                        labels = parse_labels(sample["labels"])
                        labels.pop("alertstate")
                        labels.pop("alertname")
                        assert labels not in firing, f"{path.name}: {labels} pending and firing at {when}"
                    get(name).pending.append((path.name, when))
    return cases


def parse_labels(text: str) -> dict[str, str]:
    return dict(re.findall(r'(\w+)="([^"]*)"', text))


def test_every_alert_is_unit_tested_on_both_sides_of_its_thresholds_and_for() -> None:
    cases = unit_test_cases()
    missing = []
    for name in alert_names():
        c = cases.get(name, Cases([], [], []))
        for side, found in (("firing", c.firing), ("pending (before for:)", c.pending), ("silent", c.silent)):
            if not found:
                missing.append(f"{name}: no {side} case")
    assert not missing, "\n".join(missing)
    assert set(cases) <= set(alert_names()), f"tests of unknown alerts: {set(cases) - set(alert_names())}"


def test_unit_tests_evaluate_recordings_before_alerts() -> None:
    """promtool orders groups at random unless told: every test file lists them as rules.yaml does."""
    groups = [g["name"] for g in rules_doc()["groups"]]
    for path in UNIT_TESTS:
        doc = yaml.safe_load(path.read_text())
        assert doc["rule_files"] == ["../rules.yaml"], path.name
        assert doc.get("group_eval_order") == groups, path.name


def test_descriptions_name_every_label_of_their_alert() -> None:
    """What identifies an alert (agent, tool, scorer, topic, …: the labels its firing tests expect) is in its
    description, so a page says which agent and tool."""
    firing_labels: dict[str, set[str]] = {}
    for path in UNIT_TESTS:
        for group in yaml.safe_load(path.read_text())["tests"]:
            for t in group.get("alert_rule_test", []):
                for a in t.get("exp_alerts") or []:
                    firing_labels.setdefault(t["alertname"], set()).update(a.get("exp_labels", {}))
    for rule in alert_rules():
        labels = firing_labels.get(rule["alert"], set()) - {"severity", "job"}
        for label in labels:
            assert f"$labels.{label}" in rule["annotations"]["description"], (rule["alert"], label)
    agent_alerts = [r["alert"] for r in alert_rules() if "agent" in firing_labels.get(r["alert"], set())]
    assert len(agent_alerts) >= 4, agent_alerts


# ---------------------------------------------------------------------------------------------- metrics


def exported_metric_names() -> set[str]:
    """Every sample name the daemon's registry can export, from its metric families (labelled metrics included,
    whether or not they have series yet)."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "info": ("_info",)}
    names: set[str] = set()
    for family in Metrics(MetricsSettings.model_validate({})).registry.collect():
        names.update(family.name + s for s in suffixes.get(family.type, ("",)))
    return names


def referenced_metrics(expr: str) -> Iterator[str]:
    """Raw metric names in a PromQL expression: not recorded names (they hold a ':'), label names, functions or
    keywords."""
    expr = re.sub(r'"[^"]*"', '""', expr)
    expr = re.sub(r"\{[^}]*\}", "{}", expr)
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"\s+\(", "(", expr)
    for m in re.finditer(r"(?<![\w:.])([a-z_][a-z0-9_]*)(?![\w:(])", expr):
        if m.group(1) not in {"and", "or", "unless", "offset", "bool"}:
            yield m.group(1)


def test_rules_read_only_metrics_the_daemon_exports() -> None:
    exported = exported_metric_names() | {"up"}
    seen = set()
    for group in rules_doc()["groups"]:
        for rule in group["rules"]:
            for name in referenced_metrics(rule["expr"]):
                seen.add(name)
                assert name in exported, f"{rule.get('alert') or rule['record']}: {name} is not a metric of the daemon"
    assert {"monitor_tool_selection_errors_total", "monitor_runs_scored_total", "up"} <= seen
    # the recorded series each rule reads are recorded in the file
    recorded = {r["record"] for g in rules_doc()["groups"] for r in g["rules"] if "record" in r}
    for group in rules_doc()["groups"]:
        for rule in group["rules"]:
            for name in re.findall(r"\b[a-z_]+:[a-z0-9_:]+\b", rule["expr"]):
                assert name in recorded, f"{rule.get('alert') or rule['record']} reads {name}, which nothing records"
