"""HttpServer over real HTTP: /metrics content negotiation, /healthz and /readyz transitions, lifecycle."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
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


# --------------------------------------------------------------------------- store outage readiness


def test_readyz_fails_once_the_store_is_down_longer_than_the_allowed_outage() -> None:
    health = HealthState()
    health.set_assigned(2)
    assert health.readiness(100, max_store_outage_s=30.0, now=1000.0).reason == "ok"
    health.set_store_available(False, now=1000.0)
    assert health.readiness(100, max_store_outage_s=30.0, now=1030.0).ready  # exactly the allowance: still ready
    health.set_store_available(False, now=1020.0)  # later failures do not restart the outage clock
    down = health.readiness(100, max_store_outage_s=30.0, now=1030.5)
    assert (down.ready, down.reason) == (False, "store_unavailable")
    health.set_store_available(True, now=1031.0)
    assert health.readiness(100, max_store_outage_s=30.0, now=1031.0).ready
    health.set_store_available(False, now=1040.0)  # a new outage starts its own clock
    assert health.readiness(100, max_store_outage_s=30.0, now=1069.0).ready
    assert not health.readiness(100, max_store_outage_s=30.0, now=1071.0).ready


def test_readyz_over_http_answers_503_with_the_store_reason_and_recovers() -> None:
    metrics, health = Metrics(MetricsSettings()), HealthState()
    settings = HttpSettings(host="127.0.0.1", port=0, ready_max_store_outage_s=0.2)
    with HttpServer(settings, metrics, health) as server:
        health.set_assigned(1)
        health.set_store_available(False)  # the clock is time.monotonic() by default
        assert get(server.url + "/readyz")[0] == 200  # within the allowed outage
        deadline = time.monotonic() + 5
        while get(server.url + "/readyz")[0] == 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        status, _, body = get(server.url + "/readyz")
        assert status == 503 and json.loads(body)["reason"] == "store_unavailable"
        assert body.count(b"\n") == 1  # one line
        assert get(server.url + "/healthz")[0] == 200  # alive: a store outage is not a reason to restart
        health.set_store_available(True)
        status, _, body = get(server.url + "/readyz")
        assert status == 200 and json.loads(body)["reason"] == "ok"


# --------------------------------------------------------------------------- connections: timeouts and bounds


def _handler_threads_besides(before: set[threading.Thread]) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t not in before and t.name != "monitor-http"]


def _closed_by_server(sock: socket.socket, within: float) -> bool:
    """True when the server closes ``sock`` (EOF or reset) within ``within`` seconds; data is skipped."""
    deadline = time.monotonic() + within
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            if sock.recv(65536) == b"":
                return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
    return False


def test_idle_connections_beyond_the_cap_keep_threads_bounded_and_metrics_served() -> None:
    metrics, health = Metrics(MetricsSettings()), HealthState()
    metrics.spans_decoded(7)
    settings = HttpSettings(host="127.0.0.1", port=0, max_connections=4, request_timeout_s=30.0)
    before = set(threading.enumerate())
    server = HttpServer(settings, metrics, health)
    server.start()
    idle: list[socket.socket] = []
    try:
        for _ in range(20):  # five times the cap, never sending a byte
            idle.append(socket.create_connection(("127.0.0.1", server.port), timeout=5))
        time.sleep(0.5)
        assert len(_handler_threads_besides(before)) <= 4
        started = time.monotonic()
        status, _, body = get(server.url + "/metrics")  # a fresh client is served well before the 30 s timeout
        assert status == 200 and b"monitor_spans_decoded_total 7.0" in body
        assert time.monotonic() - started < 5
        assert len(_handler_threads_besides(before)) <= 4
    finally:
        for s in idle:
            s.close()
        server.stop()


def test_idle_and_slow_connections_are_closed_after_the_request_timeout() -> None:
    metrics, health = Metrics(MetricsSettings()), HealthState()
    settings = HttpSettings(host="127.0.0.1", port=0, max_connections=8, request_timeout_s=0.5)
    with HttpServer(settings, metrics, health) as server:
        silent = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        # a keep-alive client that got its answer and then idles
        kept = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert b"200" in kept.recv(4096).split(b"\r\n", 1)[0]
        # a slow client: one header byte every 0.2 s never lets the per-read timeout fire
        slow = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        slow.sendall(b"GET /metrics HTTP/1.1\r\n")
        slow_closed = False
        slow_started = time.monotonic()
        while time.monotonic() - slow_started < 3:
            try:
                slow.sendall(b"X")
            except OSError:
                slow_closed = True
                break
            slow.settimeout(0.2)
            try:
                if slow.recv(1024) == b"":
                    slow_closed = True
                    break
            except TimeoutError:
                pass
            except ConnectionResetError:
                slow_closed = True
                break
        try:
            assert _closed_by_server(silent, within=3)
            assert _closed_by_server(kept, within=3)
            assert slow_closed and time.monotonic() - slow_started < 2.5
            assert get(server.url + "/healthz")[0] == 200
        finally:
            for s in (silent, kept, slow):
                s.close()


def test_stop_is_prompt_and_ends_every_connection_thread_with_idle_clients_connected() -> None:
    metrics, health = Metrics(MetricsSettings()), HealthState()
    settings = HttpSettings(host="127.0.0.1", port=0, max_connections=3, request_timeout_s=60.0)
    before = set(threading.enumerate())
    server = HttpServer(settings, metrics, health)
    server.start()
    clients = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(6)]
    half = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    half.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # headers never finished
    time.sleep(0.3)
    try:
        started = time.monotonic()
        server.stop()
        assert time.monotonic() - started < 3
        deadline = time.monotonic() + 3
        while _handler_threads_besides(before) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _handler_threads_besides(before) == []
        assert all(_closed_by_server(c, within=2) for c in clients[:3])
    finally:
        for c in [*clients, half]:
            c.close()
