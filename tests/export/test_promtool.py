"""The real ``promtool check metrics`` accepts our classic exposition (every metric, with values)."""

from __future__ import annotations

import subprocess

from prometheus_client import generate_latest

from monitor.export.metrics import Metrics
from monitor.scoring.result import FailureKind, Issue
from monitor.settings import MetricsSettings
from tests.export.builders import OTHER_ISSUES, PARAMETER_ISSUES, SELECTION_ISSUES, make_run, result
from tests.support.prometheus import require_binary


def populated() -> Metrics:
    m = Metrics(MetricsSettings(known_agents=["planner"], known_tools=["search"]))
    m.records_consumed("otlp_spans", 0, 10)
    m.spans_decoded(40)
    m.record_invalid("not_protobuf")
    m.record_dead_lettered("not_protobuf")
    m.traces_closed("complete")
    m.late_spans(1)
    m.split_traces(1)
    m.commit_done("otlp_spans", 0, 1_700_000_000.0)
    m.set_lag("otlp_spans", 0, 3)
    m.paused(True, "judge_backpressure")
    m.store_write("new", 2)
    m.runs_sampled("sampled")
    m.set_open_traces(1, 2, 0.5)
    run = make_run()
    issues = SELECTION_ISSUES + PARAMETER_ISSUES + OTHER_ISSUES + (Issue(FailureKind.LOOP, tool="search"),)
    m.observe_results(run, [result(run, issues=issues), result(run, "judge", status="error")])
    return m


def test_promtool_check_metrics_passes() -> None:
    promtool = require_binary("promtool")
    exposition = generate_latest(populated().registry)
    proc = subprocess.run([promtool, "check", "metrics"], input=exposition, capture_output=True, timeout=30)
    assert proc.returncode == 0, (proc.stdout + proc.stderr).decode()
    assert not (proc.stdout + proc.stderr).strip(), (proc.stdout + proc.stderr).decode()


def test_promtool_flags_a_bad_counter() -> None:
    """Guard against a vacuous pass: promtool does fail on a mis-named counter here."""
    promtool = require_binary("promtool")
    bad = b"# HELP monitor_bad Bad.\n# TYPE monitor_bad counter\nmonitor_bad 1\n"
    proc = subprocess.run([promtool, "check", "metrics"], input=bad, capture_output=True, timeout=30)
    assert proc.returncode != 0 and b"_total" in proc.stdout + proc.stderr
