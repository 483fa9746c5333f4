"""The preflight: every check ``monitor run`` makes on a configuration, all problems at once, before the
store is opened or the port bound; the broker check; logging with secrets masked and client libraries
kept quiet. Real files, real sockets, a real broker (Tansu) and the real :class:`App`."""

from __future__ import annotations

import io
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor.app import EXIT_BROKERS_UNREACHABLE, EXIT_CONFIG, App
from monitor.preflight import configure_logging, preflight
from monitor.settings import SettingsError, load_settings
from tests.support.kafka import free_port


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


@pytest.fixture
def closed_port() -> int:
    return free_port()


def _bad_everything(tmp_path: Path, busy_port: int) -> dict[str, object]:
    return {
        "rules_file": tmp_path / "missing-rules.yaml",
        "scoring": {"checks": ["schema_check", "schema_chek"]},
        "store": {"url": "postgresql+psycopg2://bob:hunter2@db/results"},
        "http": {"host": "127.0.0.1", "port": busy_port},
    }


def test_every_configuration_problem_is_reported_at_once(tmp_path: Path, busy_port: int) -> None:
    settings = load_settings(**_bad_everything(tmp_path, busy_port))  # type: ignore[arg-type]
    report = preflight(settings, brokers=False)
    assert report.exit_code == EXIT_CONFIG
    names = [p.split(" = ", 1)[0] for p in report.problems]
    assert names == ["rules_file", "scoring.checks.1", "store.url", "http.port"], report.problems
    text = report.render()
    assert "the file does not exist" in text
    assert "did you mean `schema_check`?" in text
    assert "cannot import 'psycopg2'" in text and "hunter2" not in text
    assert f"http.port = {busy_port}: already in use on 127.0.0.1" in text
    assert all(". Fix: " in p for p in report.problems)


@pytest.mark.parametrize(
    ("section", "value", "fragment"),
    [
        ("store", {"url": "not a url"}, "store.url = 'not a url': not a database URL"),
        ("store", {"url": "mysql://u@h/db"}, "supports SQLite and PostgreSQL, not mysql"),
        ("store", {"url": "postgresql+asyncpg://u@h/db"}, "store.url"),
        ("store", {"url": "sqlite:////no/such/dir/monitor.db"}, "the directory /no/such/dir does not exist"),
        ("http", {"host": "no-such-host.invalid", "port": 0}, "http.host = 'no-such-host.invalid': does not resolve"),
        ("http", {"host": "192.0.2.1", "port": 0}, "http.host = '192.0.2.1': not an address of this machine"),
        ("kafka", {"spans_topic": "spans topic"}, "kafka.spans_topic = 'spans topic'"),
        ("kafka", {"dead_letter_suffix": "/dlq"}, "kafka.dead_letter_suffix = '/dlq'"),
    ],
)
def test_each_check(section: str, value: dict[str, object], fragment: str) -> None:
    settings = load_settings(**{section: value})
    report = preflight(settings, brokers=False)
    assert report.exit_code == EXIT_CONFIG
    assert len(report.problems) == 1 and fragment in report.problems[0], report.problems


def test_an_invalid_rules_file_lists_its_problems(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - match: {agent: planner}\n    scorers:\n      nope_check: {}\n")
    report = preflight(load_settings(rules_file=rules, http={"port": 0}), brokers=False)
    assert report.exit_code == EXIT_CONFIG
    assert report.problems and all(p.startswith(f"rules_file = '{rules}': rules[0]") for p in report.problems)
    rules.write_text("rules: [unclosed\n")
    assert "invalid YAML" in preflight(load_settings(rules_file=rules, http={"port": 0}), brokers=False).render()


def test_a_problem_from_the_environment_names_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONITOR_RULES_FILE", str(tmp_path / "gone.yaml"))
    monkeypatch.setenv("MONITOR_SCORING__CHECKS", '["schema_check", "loop_check"]')
    report = preflight(load_settings(http={"port": 0}), brokers=False)
    assert [p.split(" = ", 1)[0] for p in report.problems] == [
        "MONITOR_RULES_FILE",
        "MONITOR_SCORING__CHECKS (scoring.checks.1)",
    ]
    assert "point MONITOR_RULES_FILE at" in report.problems[0]


def test_valid_configuration_with_a_reachable_broker(kafka_bootstrap: str) -> None:
    report = preflight(load_settings(kafka={"bootstrap_servers": kafka_bootstrap}, http={"port": 0}))
    assert (report.exit_code, report.problems, report.brokers) == (0, (), None)
    assert report.render() == "configuration valid: environment (every check passed)"


def test_unreachable_brokers_are_one_line_within_the_startup_timeout(closed_port: int) -> None:
    settings = load_settings(
        kafka={"bootstrap_servers": f"127.0.0.1:{closed_port},no-such-broker.invalid:9092", "startup_timeout_s": 3},
        http={"port": 0},
    )
    started = time.monotonic()
    report = preflight(settings)
    assert time.monotonic() - started < 3 + 2
    assert report.exit_code == EXIT_BROKERS_UNREACHABLE
    line = report.render()
    assert "\n" not in line
    assert line.startswith(
        f"cannot reach the Kafka brokers at 127.0.0.1:{closed_port},no-such-broker.invalid:9092 within 3s: "
    )
    assert f"127.0.0.1:{closed_port}: connection refused" in line and "does not resolve" in line


def test_a_listener_that_is_not_kafka_fails_within_the_timeout_and_leaves_no_client_thread() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)  # accepts connections (the kernel does) but never answers a request
        port = listener.getsockname()[1]
        settings = load_settings(kafka={"bootstrap_servers": f"127.0.0.1:{port}", "startup_timeout_s": 1.5})
        before = set(threading.enumerate())
        started = time.monotonic()
        report = preflight(settings, brokers=True)
        assert time.monotonic() - started < 1.5 + 2
    assert report.exit_code == EXIT_BROKERS_UNREACHABLE
    assert "accepted the connection but gave no Kafka answer" in report.render()
    time.sleep(0.2)
    assert [t.name for t in set(threading.enumerate()) - before] == []


def test_config_problems_and_an_unreachable_broker_are_reported_together(closed_port: int, tmp_path: Path) -> None:
    settings = load_settings(
        rules_file=tmp_path / "none.yaml", kafka={"bootstrap_servers": f"127.0.0.1:{closed_port}"}, http={"port": 0}
    )
    report = preflight(settings)
    assert report.exit_code == EXIT_CONFIG
    err = report.error()
    assert isinstance(err, SettingsError) and len(err.problems) == 2
    assert err.problems[1].startswith("cannot reach the Kafka brokers")


# --------------------------------------------------------------------------- App.run checks first


def test_app_run_checks_before_opening_the_store_or_binding_the_port(
    tmp_path: Path, busy_port: int, kafka_bootstrap: str
) -> None:
    db = tmp_path / "results.db"
    settings = load_settings(
        rules_file=tmp_path / "missing.yaml",
        sampling={"per_agent": {"planner": 0.5}},
        kafka={"bootstrap_servers": kafka_bootstrap},
        store={"url": f"sqlite:///{db}"},
        http={"host": "127.0.0.1", "port": busy_port},
    )
    app = App(settings)
    assert app.run() == EXIT_CONFIG
    assert isinstance(app.error, SettingsError) and len(app.error.problems) == 2
    assert not db.exists()  # the store was neither created nor migrated
    assert app.http is None and app.store is None


def test_app_run_with_unreachable_brokers_exits_4_without_touching_the_store(tmp_path: Path, closed_port: int) -> None:
    db = tmp_path / "results.db"
    settings = load_settings(
        kafka={"bootstrap_servers": f"127.0.0.1:{closed_port}", "startup_timeout_s": 2},
        store={"url": f"sqlite:///{db}"},
        http={"host": "127.0.0.1", "port": 0},
    )
    app = App(settings)
    started = time.monotonic()
    assert app.run() == EXIT_BROKERS_UNREACHABLE
    assert time.monotonic() - started < 2 + 3
    assert str(app.error).startswith(f"cannot reach the Kafka brokers at 127.0.0.1:{closed_port} within 2s")
    assert not db.exists()


# --------------------------------------------------------------------------- logging


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level, {n: logging.getLogger(n).level for n in ("kafka", "sqlalchemy")})
    yield
    for handler in list(root.handlers):
        if handler not in saved[0]:
            root.removeHandler(handler)
    root.setLevel(saved[1])
    for name, level in saved[2].items():
        logging.getLogger(name).setLevel(level)


@pytest.mark.usefixtures("restore_logging")
def test_logging_masks_secrets_and_keeps_client_libraries_out_of_debug() -> None:
    out = io.StringIO()
    configure_logging(load_settings(log_level="DEBUG"), out)
    logging.getLogger("monitor.test").debug("store at %s", "postgresql://bob:hunter2@db/x?sslpassword=s3cr3t")
    try:
        raise RuntimeError("connect failed: postgresql://bob:hunter2@db/x")
    except RuntimeError:
        logging.getLogger("monitor.test").exception("store failed")
    logging.getLogger("kafka.net.connection").debug("Response 7: raw record bytes")
    logging.getLogger("sqlalchemy.engine.Engine").info("INSERT INTO results VALUES (...)")
    logging.getLogger("kafka.coordinator").info("joined group")
    text = out.getvalue()
    assert "hunter2" not in text and "s3cr3t" not in text
    assert "store at postgresql://bob:***@db/x?sslpassword=***" in text
    assert "raw record bytes" not in text and "INSERT INTO" not in text
    assert "joined group" in text  # kafka-python's INFO (group membership) stays

    configure_logging(load_settings(log_level="DEBUG", log_client_debug=True), out)
    logging.getLogger("kafka.net.connection").debug("Response 8: raw record bytes")
    assert "Response 8: raw record bytes" in out.getvalue()
    assert len([h for h in logging.getLogger().handlers if type(h).__name__ == "_MonitorHandler"]) == 1


@pytest.mark.usefixtures("restore_logging")
def test_json_logs_are_one_masked_object_per_line() -> None:
    out = io.StringIO()
    configure_logging(load_settings(log_format="json"), out)
    logging.getLogger("monitor.test").info("store at %s — ünïcode", "postgresql://bob:hunter2@db/x")
    try:
        raise ValueError("token=abc sk-ant-api03-XYZ")
    except ValueError:
        logging.getLogger("monitor.test").exception("failed")
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first["level"] == "INFO" and first["logger"] == "monitor.test"
    assert first["message"] == "store at postgresql://bob:***@db/x — ünïcode"
    assert first["time"].endswith("Z") and "T" in first["time"]
    assert second["message"] == "failed" and "ValueError" in second["exception"]
    assert "hunter2" not in out.getvalue() and "XYZ" not in out.getvalue()


# --------------------------------------------------------------------------- scorer names (one registry)


def test_a_misspelled_scorer_in_the_rules_file_is_a_problem_with_did_you_mean(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "rules:\n"
        "  - match: {agent: planner}\n"
        "    scorers: {shema_check: {}, judge_tool_selectoin: {}, strict: {kind: schema_check, params: {tresh: 1}}}\n"
    )
    report = preflight(load_settings(rules_file=rules, http={"port": 0}), brokers=False)
    assert report.exit_code == EXIT_CONFIG
    assert list(report.problems[:2]) == [
        f"rules_file = '{rules}': rules[0].scorers.shema_check: unknown scorer kind 'shema_check'. "
        "Fix: did you mean 'schema_check'?",
        f"rules_file = '{rules}': rules[0].scorers.judge_tool_selectoin: unknown scorer kind 'judge_tool_selectoin'. "
        "Fix: did you mean 'judge_tool_selection'?",
    ]
    (params,) = report.problems[2:]
    assert params.startswith(f"rules_file = '{rules}': rules[0].scorers.strict.params: unknown parameter 'tresh'")
    assert params.endswith(f". Fix: correct {rules} (see docs/rules in SCORING.md §3.9)")


def test_scoring_checks_and_sampling_ids_name_registered_scorers(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - scorers: {'tool_eval:lit': {params: {variant: literal}}}\n")
    settings = load_settings(
        rules_file=rules,
        scoring={"checks": ["schema_check", "judge_goal_acuracy", "mastra_tool_call_accuracy", "judge_goal_accuracy"]},
        sampling={"per_scorer": {"tool_eval:lit": 0.5, "schema_check[roll_die]": 0.5, "latency_chek": 0.1}},
        http={"port": 0},
    )
    problems = preflight(settings, brokers=False).problems
    assert [p.split(": ", 1)[0] for p in problems] == [
        "scoring.checks.1 = 'judge_goal_acuracy'",
        "scoring.checks.2 = 'mastra_tool_call_accuracy'",
        "sampling.per_scorer.latency_chek = 0.1",
    ]
    assert problems[0].endswith("Fix: did you mean `judge_goal_accuracy`? use kinds that `monitor scorers` lists")
    assert "this scorer needs parameters (" in problems[1] and "expected_tool" in problems[1]
    assert "no scorer has the id 'latency_chek'" in problems[2] and "did you mean `latency_check`?" in problems[2]
