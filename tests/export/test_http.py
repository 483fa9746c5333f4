"""HttpServer over real HTTP: /metrics content negotiation, /healthz and /readyz transitions, lifecycle."""

from __future__ import annotations

import gzip
import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from monitor.export.http import HealthState, HttpServer
from monitor.export.metrics import Metrics
from monitor.settings import HttpSettings, MetricsSettings
from tests.export.builders import SELECTION_ISSUES, TRACE, make_run, result

OPENMETRICS = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"


def get(url: str, **headers: str) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


@pytest.fixture
def served() -> Iterator[tuple[HttpServer, Metrics, HealthState]]:
    metrics = Metrics(MetricsSettings(known_tools=["search", "fetch"]))
    health = HealthState()
    server = HttpServer(HttpSettings(host="127.0.0.1", port=0, ready_max_lag=100), metrics, health)
    server.start()
    yield server, metrics, health
    server.stop()


def test_metrics_classic_by_default_openmetrics_with_exemplars_when_asked(
    served: tuple[HttpServer, Metrics, HealthState],
) -> None:
    server, metrics, _ = served
    run = make_run()
    metrics.observe_results(run, [result(run, issues=SELECTION_ISSUES)])

    status, headers, body = get(server.url + "/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    text = body.decode()
    assert 'monitor_tool_selection_errors_total{agent="planner",kind="wrong_tool",tool="fetch"} 1.0' in text
    assert TRACE not in text

    status, headers, body = get(server.url + "/metrics", Accept=OPENMETRICS)
    assert status == 200
    assert headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    sample = next(s for s in families["monitor_tool_selection_errors"].samples if s.labels.get("kind") == "wrong_tool")
    assert sample.value == 1 and sample.exemplar is not None
    assert sample.exemplar.labels["trace_id"] == TRACE


def test_metrics_gzip_and_name_filter(served: tuple[HttpServer, Metrics, HealthState]) -> None:
    server, metrics, _ = served
    metrics.spans_decoded(3)
    status, headers, body = get(
        server.url + "/metrics?name[]=monitor_spans_decoded_total", **{"Accept-Encoding": "gzip"}
    )
    assert status == 200 and headers.get("Content-Encoding") == "gzip"
    text = gzip.decompress(body).decode()
    assert "monitor_spans_decoded_total 3.0" in text
    assert "monitor_records_consumed" not in text


def test_healthz_follows_alive(served: tuple[HttpServer, Metrics, HealthState]) -> None:
    server, _, health = served
    status, headers, body = get(server.url + "/healthz")
    assert (status, json.loads(body)) == (200, {"alive": True})
    assert headers["Content-Type"] == "application/json"
    health.set_alive(False)
    status, _, body = get(server.url + "/healthz")
    assert (status, json.loads(body)) == (503, {"alive": False})
    health.set_alive(True)
    assert get(server.url + "/healthz")[0] == 200


def test_readyz_transitions(served: tuple[HttpServer, Metrics, HealthState]) -> None:
    server, _, health = served

    def ready() -> tuple[int, dict[str, Any]]:
        status, _, body = get(server.url + "/readyz")
        return status, json.loads(body)

    status, body = ready()
    assert status == 503 and body["reason"] == "no_partitions_assigned" and body["ready"] is False
    health.set_assigned(3)
    status, body = ready()
    assert (status, body) == (200, {"ready": True, "reason": "ok", "partitions": 3, "lag": 0, "max_lag": 100})
    health.set_lag(100)
    assert ready()[0] == 200  # lag <= max is ready
    health.set_lag(101)
    status, body = ready()
    assert status == 503 and body["reason"] == "lag_too_high" and body["lag"] == 101
    health.set_lag(5)
    assert ready()[0] == 200
    health.set_assigned(0)  # revoked
    assert ready() == (
        503,
        {"ready": False, "reason": "no_partitions_assigned", "partitions": 0, "lag": 5, "max_lag": 100},
    )
    health.set_assigned(1)
    health.set_alive(False)
    assert ready()[1]["reason"] == "not_alive"


def test_unknown_path_and_method(served: tuple[HttpServer, Metrics, HealthState]) -> None:
    server, _, _ = served
    assert get(server.url + "/nope")[0] == 404
    req = urllib.request.Request(server.url + "/metrics", data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=5)
    assert err.value.code == 405
    head = urllib.request.Request(server.url + "/healthz", method="HEAD")
    with urllib.request.urlopen(head, timeout=5) as resp:
        assert resp.status == 200 and resp.read() == b""


def test_start_stop_lifecycle_frees_the_port() -> None:
    metrics, health = Metrics(MetricsSettings()), HealthState()
    server = HttpServer(HttpSettings(host="127.0.0.1", port=0), metrics, health)
    with pytest.raises(RuntimeError):
        _ = server.port
    server.start()
    port = server.port
    assert port > 0
    with pytest.raises(RuntimeError):
        server.start()
    assert get(server.url + "/healthz")[0] == 200
    server.stop()
    server.stop()  # idempotent
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass
    # the same fixed port can be bound again at once
    again = HttpServer(HttpSettings(host="127.0.0.1", port=port), metrics, health)
    with again:
        assert again.port == port
        assert get(again.url + "/healthz")[0] == 200


def test_port_taken_raises() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        server = HttpServer(HttpSettings(host="127.0.0.1", port=port), Metrics(MetricsSettings()), HealthState())
        with pytest.raises(OSError):
            server.start()
