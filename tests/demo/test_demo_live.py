"""`monitor demo` end to end: embedded broker, simulated agents, the daemon, the summary."""

from __future__ import annotations

import pytest

from monitor.cli import main


def test_demo_scores_simulated_traffic_and_prints_what_it_found(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--duration", "6", "--rate", "15", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "daemon up: metrics at http://127.0.0.1:" in out
    assert "failure patterns found" in out and "scorers" in out
    for kind in ("missing_tool", "tool_error", "repeated_call"):
        assert kind in out, kind
    assert "schema_check" in out and "tools_selected" in out
