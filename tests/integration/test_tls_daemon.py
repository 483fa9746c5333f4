"""The daemon over TLS, end to end: Tansu behind a real TLS endpoint (Python's ``ssl``, certificates made by the
``cryptography`` package; :mod:`tests.support.tls_proxy`), Tansu advertising the TLS port so that no client ever
reaches the plaintext broker.

The daemon consumes and dead-letters over TLS (server certificate checked against ``kafka.tls.ca_file``, host
name checked), over mutual TLS with an encrypted client key, and over SASL_SSL (SCRAM-SHA-512; the SASL server side
is the test proxy's). A wrong CA, a certificate for another host name and a missing client certificate stop it
before it starts (exit 4) with one line naming the ``kafka.tls`` key to change; ``check_hostname: false`` accepts the
other host name.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from monitor.app import App
from monitor.preflight import EXIT_BROKERS_UNREACHABLE
from tests.support.daemon import agent_traffic, daemon_settings, daemon_thread, metric_sum, names, scrape, wait_for
from tests.support.tls_proxy import Issued, Pki, TlsKafkaProxy, security_kwargs_for, tls_tansu

BAD_RECORD = (b"bad-0", b"\xff\x00not otlp", [("origin", b"tls-test")])


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[TlsKafkaProxy]:
    with tls_tansu(tmp_path_factory.mktemp("tansu-tls"), pki.server_context()) as proxy:
        yield proxy


def _setup_topic(bootstrap: str, kwargs: dict[str, Any], topic: str, traces: int, seed: int) -> int:
    """Create ``topic`` (2 partitions), write ``traces`` agent runs and one undecodable record; returns the runs."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **kwargs)
    try:
        admin.create_topics([NewTopic(topic, 2, 1)])
    finally:
        admin.close()
    traffic = agent_traffic(traces, seed=seed)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **kwargs)
    try:
        for key, value in traffic.records:
            producer.send(topic, key=key, value=value)
        producer.send(topic, key=BAD_RECORD[0], value=BAD_RECORD[1], headers=list(BAD_RECORD[2]))
        producer.flush(30)
    finally:
        producer.close()
    return traffic.runs


def _read_dead_letters(bootstrap: str, kwargs: dict[str, Any], topic: str) -> list[Any]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **kwargs)
    try:
        partitions = consumer.partitions_for_topic(topic) or {0}
        consumer.assign([TopicPartition(topic, p) for p in partitions])
        out: list[Any] = []
        deadline = time.monotonic() + 10
        while not out and time.monotonic() < deadline:
            out += [r for recs in consumer.poll(timeout_ms=200).values() for r in recs]
        return out
    finally:
        consumer.close()


def _consume_and_dead_letter(
    proxy: TlsKafkaProxy, kafka: dict[str, Any], tmp_path: Path, client_kwargs: dict[str, Any], seed: int
) -> None:
    """The daemon with ``kafka`` settings scores every run and dead-letters the bad record, over ``proxy``."""
    topic, group = names(f"tls-{seed}")
    runs = _setup_topic(proxy.bootstrap, client_kwargs, topic, traces=6, seed=seed)
    settings = daemon_settings(proxy.bootstrap, topic, group, f"sqlite:///{tmp_path / 'results.db'}", kafka=kafka)
    handshakes = proxy.stats.handshakes
    with daemon_thread(settings) as d:
        loop = d.app.loop
        assert loop is not None
        wait_for(lambda: loop.stats.traces_scored >= runs, 30, "every run scored over TLS")
        wait_for(
            lambda: metric_sum(scrape(d.port), "monitor_records_dead_lettered_total") >= 1, 15, "the dead letter sent"
        )
        wait_for(lambda: d.app.dlq is not None and d.app.dlq.pending == 0, 15, "the dead letter acknowledged")
        assert d.stop() == 0
    assert proxy.stats.handshakes > handshakes  # the daemon's clients all went through the TLS endpoint
    (letter,) = _read_dead_letters(proxy.bootstrap, client_kwargs, topic + ".dlq")
    assert letter.key == BAD_RECORD[0] and letter.value == BAD_RECORD[1]
    assert dict(letter.headers)["origin"] == b"tls-test"


def _refused(settings_kafka: dict[str, Any], proxy: TlsKafkaProxy, tmp_path: Path) -> str:
    """Run the daemon expecting it to stop at the broker check; returns the error line."""
    topic, group = names("tls-refused")
    kafka = {"startup_timeout_s": 4.0, **settings_kafka}
    app = App(daemon_settings(proxy.bootstrap, topic, group, f"sqlite:///{tmp_path / 'r.db'}", kafka=kafka))
    assert app.run() == EXIT_BROKERS_UNREACHABLE
    assert not (tmp_path / "r.db").exists()  # stopped before the store was opened
    return str(app.error)


def test_the_daemon_consumes_and_dead_letters_over_tls(tls_broker: TlsKafkaProxy, pki: Pki, tmp_path: Path) -> None:
    kafka = {"security_protocol": "SSL", "tls": {"ca_file": str(pki.ca.cert)}}
    _consume_and_dead_letter(tls_broker, kafka, tmp_path, security_kwargs_for(pki), seed=31)
    assert tls_broker.stats.tls_versions == {"TLSv1.3"}


def test_a_wrong_ca_stops_the_daemon_naming_kafka_tls_ca_file(
    tls_broker: TlsKafkaProxy, pki: Pki, tmp_path: Path
) -> None:
    line = _refused({"security_protocol": "SSL", "tls": {"ca_file": str(pki.other_ca.cert)}}, tls_broker, tmp_path)
    assert "over TLS" in line and "is not signed by a CA in kafka.tls.ca_file" in line, line
    assert str(pki.other_ca.cert) in line and "Fix: set kafka.tls.ca_file" in line
    no_ca = _refused({"security_protocol": "SSL"}, tls_broker, tmp_path)  # system CAs only
    assert "kafka.tls.ca_file is not set" in no_ca, no_ca


def test_plaintext_settings_against_the_tls_listener_and_back(
    tls_broker: TlsKafkaProxy, pki: Pki, tmp_path: Path, kafka_bootstrap: str
) -> None:
    line = _refused({"startup_timeout_s": 2.0}, tls_broker, tmp_path)  # PLAINTEXT to a TLS port
    assert "cannot reach the Kafka brokers" in line and "security settings match" in line, line
    topic, group = names("tls-to-plain")
    app = App(
        daemon_settings(
            kafka_bootstrap,
            topic,
            group,
            f"sqlite:///{tmp_path / 'p.db'}",
            kafka={"security_protocol": "SSL", "tls": {"ca_file": str(pki.ca.cert)}, "startup_timeout_s": 2.0},
        )
    )
    assert app.run() == EXIT_BROKERS_UNREACHABLE
    assert "kafka.security_protocol is SSL but this looks like a plaintext listener" in str(app.error) or (
        "gave no TLS answer" in str(app.error)
    ), app.error


def test_host_name_check_on_refuses_and_off_accepts_a_certificate_for_another_name(pki: Pki, tmp_path: Path) -> None:
    with tls_tansu(tmp_path, pki.server_context(pki.server_other_name)) as proxy:
        kafka: dict[str, Any] = {"security_protocol": "SSL", "tls": {"ca_file": str(pki.ca.cert)}}
        line = _refused(kafka, proxy, tmp_path)
        assert "is not valid for the host name '127.0.0.1'" in line and "kafka.tls.check_hostname: false" in line
        off = {"security_protocol": "SSL", "tls": {"ca_file": str(pki.ca.cert), "check_hostname": False}}
        client = security_kwargs_for(pki)
        client["ssl_context"].check_hostname = False
        _consume_and_dead_letter(proxy, off, tmp_path, client, seed=32)
        # with the check off the chain is still verified: a wrong CA is refused all the same
        wrong = _refused(
            {"security_protocol": "SSL", "tls": {"ca_file": str(pki.other_ca.cert), "check_hostname": False}},
            proxy,
            tmp_path,
        )
        assert "kafka.tls.ca_file" in wrong


def test_mutual_tls_with_an_encrypted_client_key(pki: Pki, tmp_path: Path) -> None:
    key_password = tmp_path / "key-password"
    key_password.write_text(Pki.CLIENT_KEY_PASSWORD + "\n")

    def tls(client: Issued | None) -> dict[str, Any]:
        values: dict[str, Any] = {"ca_file": str(pki.ca.cert)}
        if client is not None:
            values |= {"cert_file": str(client.cert), "key_file": str(client.key)}
        if client is pki.client_encrypted:
            values["key_password_file"] = str(key_password)
        return {"security_protocol": "SSL", "tls": values}

    with tls_tansu(tmp_path, pki.server_context(client_ca=pki.client_ca.cert)) as proxy:
        missing = _refused(tls(None), proxy, tmp_path)
        assert (
            "requires a client certificate" in missing and "set kafka.tls.cert_file and kafka.tls.key_file" in missing
        )
        stranger = _refused(tls(pki.stranger), proxy, tmp_path)
        assert "refused the client certificate kafka.tls.cert_file" in stranger, stranger
        client_kwargs = security_kwargs_for(pki, client=pki.client)
        _consume_and_dead_letter(proxy, tls(pki.client_encrypted), tmp_path, client_kwargs, seed=33)
        assert "monitor-client-encrypted" in proxy.stats.client_certificates


def test_the_daemon_consumes_and_dead_letters_over_sasl_ssl(
    pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    password = "daemon-scram-pw-41"
    monkeypatch.setenv("MONITOR_TEST_KAFKA_PASSWORD", password)
    with tls_tansu(tmp_path, pki.server_context(), sasl_users={"monitor": password}) as proxy:
        kafka = {
            "security_protocol": "SASL_SSL",
            "tls": {"ca_file": str(pki.ca.cert)},
            "sasl": {
                "mechanism": "SCRAM-SHA-512",
                "username": "monitor",
                "password_env": "MONITOR_TEST_KAFKA_PASSWORD",
            },
        }
        client = security_kwargs_for(pki) | {
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": "monitor",
            "sasl_plain_password": password,
        }
        _consume_and_dead_letter(proxy, kafka, tmp_path, client, seed=34)
        assert proxy.stats.sasl_failures == []
        assert sum(1 for m, user in proxy.stats.authenticated if (m, user) == ("SCRAM-SHA-512", "monitor")) >= 4
    out, err = capfd.readouterr()
    assert password not in out + err
