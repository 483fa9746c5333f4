"""`monitor inspect`: record files in every layout → rebuilt runs, as a table or JSON lines."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from monitor.cli import main
from monitor.ingest.encode import encode, split_spans
from monitor.ingest.files import split_records
from monitor.trajectory.serialize import run_from_json, run_to_json
from tests.spanutil import Recorder, agent_run

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "records"


def _weather(city: str) -> dict[str, object]:
    return {"city": city, "temp": 18}


@pytest.fixture()
def request_two_calls():  # type: ignore[no-untyped-def]
    rec = Recorder()
    agent_run(
        rec.tracer(), {"get_weather": _weather}, [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Oslo"})]
    )
    return rec.request()


def test_json_output_uses_the_trajectory_contract_and_round_trips(
    tmp_path: Path,
    request_two_calls,
    capsys: pytest.CaptureFixture[str],  # type: ignore[no-untyped-def]
) -> None:
    path = tmp_path / "rec.pb"
    path.write_bytes(encode(request_two_calls, "otlp_proto"))
    assert main(["inspect", str(path), "--format", "json"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    doc = json.loads(line)
    assert doc["agent"] == "weather" and doc["user_text"] == "hi" and doc["final_response"] == "done"
    assert [(c["name"], c["args"], c["executed"], c["step"], c["part"]) for c in doc["calls"]] == [
        ("get_weather", {"city": "Paris"}, True, 0, 0),
        ("get_weather", {"city": "Oslo"}, True, 0, 1),
    ]
    assert run_to_json(run_from_json(doc))["calls"] == doc["calls"]


def test_every_file_layout_is_read(tmp_path: Path, request_two_calls) -> None:  # type: ignore[no-untyped-def]
    parts = split_spans(request_two_calls, 3)
    proto = [encode(p, "otlp_proto") for p in parts]
    framed = b"".join(struct.pack(">I", len(v)) + v for v in proto)
    assert list(split_records(framed)) == proto
    jsonl = b"\n".join(encode(p, "otlp_json") for p in parts) + b"\n"
    assert len(list(split_records(jsonl))) == 3
    assert list(split_records(proto[0])) == [proto[0]]
    assert list(split_records(encode(parts[0], "otlp_json"))) == [encode(parts[0], "otlp_json")]


def test_table_output_and_bad_records_are_reported_not_fatal(
    tmp_path: Path,
    request_two_calls,
    capsys: pytest.CaptureFixture[str],  # type: ignore[no-untyped-def]
) -> None:
    good = tmp_path / "good.jsonl"
    good.write_bytes(b"\n".join(encode(p, "otlp_json") for p in split_spans(request_two_calls, 2)))
    bad = tmp_path / "bad.pb"
    bad.write_bytes(b"\xff\x00garbage")
    assert main(["inspect", str(good), str(bad), str(tmp_path / "missing.pb")]) == 0
    out = capsys.readouterr().out
    assert "weather" in out and "get_weather" in out and '"Oslo"' in out
    assert "bad.pb record 1: invalid_protobuf" in out and "missing.pb: cannot read" in out
    assert "3 records, 5 spans, 1 runs" in out


def test_bundled_demo_records_rebuild_four_frameworks(capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(str(p) for p in EXAMPLES.iterdir())
    assert main(["inspect", *files, "--format", "json"]) == 0
    runs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(r["agent"] for r in runs) == ["travel_agent", "triage", "weather_agent", "weather_agent"]
    assert all(r["calls"] for r in runs)


def test_names_that_look_like_markup_print_as_they_are() -> None:
    import io

    from rich.console import Console

    from monitor.commands.inspect import run_tree
    from monitor.trajectory.serialize import run_from_json

    run = run_from_json(
        {
            "trace_id": "a" * 32,
            "run_id": "b" * 16,
            "agent": "agent [/bold]",
            "user_input": "hi [red]",
            "tools_offered": [{"name": "tool[/x]"}],
            "calls": [{"name": "tool[/x]", "kind": "mcp", "error": {"type": "E[/i]", "message": "m[b]"}}],
        }
    )
    out = io.StringIO()
    Console(file=out, width=200).print(run_tree(run))
    text = out.getvalue()
    assert "agent [/bold]" in text and "tool[/x]" in text and "E[/i]: m[b]" in text and "[mcp]" in text


def test_explain_lists_what_an_unknown_framework_left_unread_with_scope_and_keys_never_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = Recorder(service="acme")
    tracer = rec.provider.get_tracer("acme.agents", "0.3.1")
    with tracer.start_as_current_span("acme.run"):
        with tracer.start_as_current_span("acme.tool", attributes={"acme.tool.name": "get_weather"}) as tool:
            tool.set_attribute("acme.tool.input", '{"city": "Paris"}')
        with tracer.start_as_current_span("acme.memory", attributes={"acme.memory.query": "private note"}):
            pass
    path = tmp_path / "acme.pb"
    path.write_bytes(encode(rec.request(), "otlp_proto"))
    assert main(["inspect", "--explain", str(path)]) == 0
    out = capsys.readouterr().out
    assert "conventions: generic" in out and "get_weather" in out  # the run, flagged
    assert "acme.memory" in out and "no known convention" in out and "acme.memory.query" in out
    assert "private note" not in out
    assert "scope acme.agents 0.3.1: 0 read, 1 structure only, 1 generic, 1 not read" in out
    assert main(["inspect", "--explain", "--format", "json", str(path)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    notes = [line["span_note"] for line in lines if "span_note" in line]
    assert sorted((n["name"], n["verdict"]) for n in notes) == [
        ("acme.memory", "not_read"),
        ("acme.run", "structure"),
        ("acme.tool", "generic"),
    ]
