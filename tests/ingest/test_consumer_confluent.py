"""What is particular to the confluent-kafka backend (:mod:`monitor.ingest.consumer_confluent`); the
:class:`~monitor.ingest.consumer.Source` contract itself runs on it in tests/contract/test_source_contract.py.

Real parts: confluent-kafka (librdkafka) against Tansu, and through the TLS + SASL test endpoint of
:mod:`tests.support.tls_proxy` (Python's ``ssl`` with a throwaway PKI; its SASL server side is test code). Checked
here: the settings and security mapping to librdkafka properties, the settings error when the package is missing,
record timestamps, ``poll`` returning as soon as records arrive, commits refused by a stopped broker and by an
evicted member, lag from the committed offset, and secrets kept out of ``repr`` and of librdkafka's debug log.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka import KafkaProducer

from monitor.demo.broker import TansuBroker
from monitor.ingest.consumer import CommitError, Record
from monitor.ingest.consumer_confluent import ConfluentSource, librdkafka_config, redacted
from monitor.ingest.security import KafkaSecurityError, build_security
from monitor.settings import KafkaSettings, SettingsError, load_settings
from tests.support.daemon import names
from tests.support.kafka import FAST_GROUP, committed, create_topics, produce
from tests.support.tls_proxy import Pki, TlsKafkaProxy, tls_tansu

PASSWORD = "pw-Cf7k-scram"
TP = tuple[str, int]


def settings(bootstrap: str, topic: str, group: str, **values: Any) -> KafkaSettings:
    return KafkaSettings(
        bootstrap_servers=bootstrap,
        spans_topic=topic,
        group_id=group,
        client="confluent",
        session_timeout_ms=FAST_GROUP["session_timeout_ms"],
        heartbeat_interval_ms=FAST_GROUP["heartbeat_interval_ms"],
        **values,
    )


class Driven:
    """A :class:`ConfluentSource` and what its callbacks saw; ``on_revoke`` runs inside the revocation callback."""

    def __init__(self, kafka: KafkaSettings, **config: Any) -> None:
        self.events: list[tuple[str, list[TP]]] = []
        self.records: list[Record] = []
        self.on_revoke: Callable[[list[TP]], None] | None = None
        self.source = ConfluentSource(kafka, self._revoked, self._assigned, fetch_max_wait_ms=100, **config)

    def _revoked(self, tps: list[TP]) -> None:
        self.events.append(("revoked", tps))
        if self.on_revoke is not None:
            self.on_revoke(tps)

    def _assigned(self, tps: list[TP]) -> None:
        self.events.append(("assigned", tps))

    def until(self, done: Callable[[], bool], what: str, timeout: float = 40.0) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {self.events}"
            self.records.extend(self.source.poll(200))

    def joined(self) -> bool:
        return any(kind == "assigned" and tps for kind, tps in self.events)


@pytest.fixture
def driven() -> Iterator[list[Driven]]:
    made: list[Driven] = []
    yield made
    for d in made:
        d.source.close()


# ------------------------------------------------------------------ settings → librdkafka (no broker)


def test_the_settings_kafka_python_uses_map_to_librdkafka_properties() -> None:
    kafka = KafkaSettings(
        bootstrap_servers="b1:9092,b2:9092",
        spans_topic="spans",
        group_id="monitors",
        client="confluent",
        auto_offset_reset="latest",
        session_timeout_ms=12_000,
        heartbeat_interval_ms=1_500,
        max_poll_records=64,
    )
    config = librdkafka_config(kafka)
    assert config == {
        "bootstrap.servers": "b1:9092,b2:9092",
        "group.id": "monitors",
        "client.id": "monitor-monitors",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "latest",
        "session.timeout.ms": 12_000,
        "heartbeat.interval.ms": 1_500,
        "partition.assignment.strategy": "range,roundrobin",
        "isolation.level": "read_uncommitted",
        "check.crcs": True,
        "enable.partition.eof": False,
        "log.connection.close": False,
        "security.protocol": "PLAINTEXT",
    }
    source = ConfluentSource(kafka, lambda tps: None, lambda tps: None)
    try:
        assert source.max_poll_records == 64 and source.topics == ["spans"]
    finally:
        source.close()


def test_extra_settings_by_kafka_python_or_librdkafka_name_and_unknown_names_refused() -> None:
    kafka = KafkaSettings(client="confluent")
    config = librdkafka_config(
        kafka, fetch_max_wait_ms=100, max_poll_interval_ms=10_000, max_poll_records=7, **{"queued.min.messages": 1000}
    )
    assert config["fetch.wait.max.ms"] == 100 and config["max.poll.interval.ms"] == 10_000
    assert config["queued.min.messages"] == 1000
    assert "max_poll_records" not in config and "max.poll.records" not in config
    source = ConfluentSource(kafka, lambda tps: None, lambda tps: None, max_poll_records=7)
    try:
        assert source.max_poll_records == 7
    finally:
        source.close()
    with pytest.raises(ValueError, match="ssl_context"):
        librdkafka_config(kafka, ssl_context=None)


def test_tls_and_sasl_settings_map_to_librdkafka_and_secrets_stay_out_of_repr_and_redacted_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pki = Pki(tmp_path / "pki")
    monkeypatch.setenv("KAFKA_PW", PASSWORD)
    key_password = tmp_path / "key-password"
    key_password.write_text(Pki.CLIENT_KEY_PASSWORD + "\n")
    kafka = load_settings(
        kafka={
            "client": "confluent",
            "security_protocol": "SASL_SSL",
            "tls": {
                "ca_file": str(pki.ca.cert),
                "cert_file": str(pki.client_encrypted.cert),
                "key_file": str(pki.client_encrypted.key),
                "key_password_file": str(key_password),
                "check_hostname": False,
            },
            "sasl": {"mechanism": "SCRAM-SHA-512", "username": "monitor", "password_env": "KAFKA_PW"},
        }
    ).kafka
    config = librdkafka_config(kafka)
    assert {k: v for k, v in config.items() if k.startswith(("ssl.", "sasl.", "security."))} == {
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(pki.ca.cert),
        "ssl.endpoint.identification.algorithm": "none",
        "ssl.certificate.location": str(pki.client_encrypted.cert),
        "ssl.key.location": str(pki.client_encrypted.key),
        "ssl.key.password": Pki.CLIENT_KEY_PASSWORD,
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "monitor",
        "sasl.password": PASSWORD,
    }
    shown = repr(redacted(config))
    assert PASSWORD not in shown and Pki.CLIENT_KEY_PASSWORD not in shown and shown.count("'***'") == 2
    source = ConfluentSource(kafka, lambda tps: None, lambda tps: None)
    try:
        assert PASSWORD not in repr(source) and Pki.CLIENT_KEY_PASSWORD not in repr(source)
    finally:
        source.close()

    # TLS without a CA file: the system's CAs; the host name checked by default; a key inside the certificate file
    plain_tls = load_settings(
        kafka={"client": "confluent", "security_protocol": "SSL", "tls": {"cert_file": str(pki.client.cert)}}
    ).kafka
    both = tmp_path / "client-with-key.pem"
    both.write_bytes(pki.client.cert.read_bytes() + pki.client.key.read_bytes())
    plain_tls = plain_tls.model_copy(update={"tls": plain_tls.tls.model_copy(update={"cert_file": both})})
    config = librdkafka_config(plain_tls)
    assert config["ssl.ca.location"] == "probe" and config["ssl.endpoint.identification.algorithm"] == "https"
    assert config["ssl.certificate.location"] == config["ssl.key.location"] == str(both)
    assert "sasl.mechanism" not in config and "ssl.key.password" not in config


def test_unusable_security_settings_are_refused_as_with_kafka_python(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAFKA_PW_UNSET", raising=False)
    kafka = load_settings(
        kafka={
            "client": "confluent",
            "security_protocol": "SASL_PLAINTEXT",
            "sasl": {"mechanism": "PLAIN", "username": "monitor", "password_env": "KAFKA_PW_UNSET"},
        }
    ).kafka
    with pytest.raises(KafkaSecurityError) as info:
        ConfluentSource(kafka, lambda tps: None, lambda tps: None)
    with pytest.raises(KafkaSecurityError) as same:
        build_security(kafka)
    assert info.value.problems == same.value.problems
    assert "kafka.sasl.password_env = 'KAFKA_PW_UNSET'" in info.value.problems[0]


def test_choosing_confluent_without_the_package_fails_validation_with_the_key_value_and_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert load_settings(kafka={"client": "confluent"}).kafka.client == "confluent"
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)  # what an environment without the package looks like
    with pytest.raises(SettingsError) as info:
        load_settings(kafka={"client": "confluent"})
    (line,) = info.value.problems
    assert line.startswith("kafka.client = 'confluent': the confluent-kafka package is not installed"), line
    assert "pip install 'agent-tool-monitor[confluent]'" in line and "kafka-python" in line
    assert load_settings(kafka={"client": "kafka-python"}).kafka.client == "kafka-python"


# ------------------------------------------------------------------ against the broker


def test_records_carry_the_kafka_timestamp_and_poll_returns_as_soon_as_one_arrives(
    kafka_bootstrap: str, driven: list[Driven]
) -> None:
    topic, group = names("cf-ts")
    create_topics(kafka_bootstrap, {topic: 1})
    member = Driven(settings(kafka_bootstrap, topic, group))
    driven.append(member)
    member.until(member.joined, "the assignment")
    # confluent-kafka's producer: kafka-python's cannot send a header without a value
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "acks": "all", "linger.ms": 0})
    stamps = [1_700_000_000_123, 1_700_000_004_567]
    for i, ts in enumerate(stamps):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("h", None), ("g", b"1")], timestamp=ts)
    assert producer.flush(10) == 0
    member.until(lambda: len(member.records) == 2, "the records")
    assert [(r.offset, r.timestamp) for r in member.records] == [(0, stamps[0]), (1, stamps[1])]
    assert [list(r.headers or []) for r in member.records] == [[("h", None), ("g", b"1")]] * 2

    # librdkafka's consume(n, timeout) waits the whole timeout for n records; poll returns with the first
    assert member.source.poll(0) == []
    started = time.monotonic()
    producer.produce(topic, value=b"late")
    assert producer.flush(10) == 0
    got = member.source.poll(5000)
    waited = time.monotonic() - started
    assert [r.value for r in got] == [b"late"] and got[0].timestamp > stamps[1]
    assert waited < 2.5, f"poll waited {waited:.2f}s for a record that was there"


def test_a_partition_that_starts_at_its_committed_end_reports_zero_lag_before_any_record(
    kafka_bootstrap: str, driven: list[Driven]
) -> None:
    topic, group = names("cf-lag")
    create_topics(kafka_bootstrap, {topic: 2})
    produce(kafka_bootstrap, topic, [(None, b"x%d" % i) for i in range(5)], partition=0)
    first = Driven(settings(kafka_bootstrap, topic, group))
    driven.append(first)
    first.until(lambda: len(first.records) == 5, "the records")
    first.source.commit({(topic, 0): 5})
    first.source.close()

    second = Driven(settings(kafka_bootstrap, topic, group))
    driven.append(second)
    second.until(lambda: (topic, 0) in second.source.lag(), "the lag of partition 0")
    assert second.source.lag() == {(topic, 0): 0}, "committed at the end: nothing to read, no partition 1 yet"
    assert second.records == []
    produce(kafka_bootstrap, topic, [(None, b"y")], partition=0)
    second.until(lambda: len(second.records) == 1, "the new record")
    assert second.records[0].offset == 5 and second.source.lag()[(topic, 0)] == 0


def test_a_commit_the_broker_cannot_take_raises_commit_error_and_the_client_log_is_not_flooded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, driven: list[Driven]
) -> None:
    broker = TansuBroker(tmp_path)
    broker.start()
    try:
        topic, group = names("cf-commit")
        create_topics(broker.bootstrap, {topic: 1})
        produce(broker.bootstrap, topic, [(None, b"a"), (None, b"b")])
        member = Driven(settings(broker.bootstrap, topic, group))
        driven.append(member)
        member.until(lambda: len(member.records) == 2, "the records")
        member.source.commit({(topic, 0): 1})
        assert committed(broker.bootstrap, group, topic, 1) == {0: 1}
    finally:
        broker.stop()
    caplog.set_level(logging.INFO, logger="kafka.librdkafka")
    started = time.monotonic()
    with pytest.raises(CommitError):
        member.source.commit({(topic, 0): 2})
    assert time.monotonic() - started < 30
    for _ in range(10):  # the member goes on polling a dead broker; librdkafka retries every connection
        assert member.source.poll(200) == []
    lines = [r.getMessage() for r in caplog.records if r.name == "kafka.librdkafka"]
    assert lines, "librdkafka's lines go to the kafka.librdkafka logger"
    assert len(lines) == len(set(lines)), f"the same line logged twice within {lines}"


def test_a_member_evicted_for_not_polling_runs_the_revocation_callback_and_its_commit_is_refused(
    kafka_bootstrap: str, driven: list[Driven]
) -> None:
    topic, group = names("cf-lost")
    create_topics(kafka_bootstrap, {topic: 1})
    produce(kafka_bootstrap, topic, [(None, b"a")])
    member = Driven(settings(kafka_bootstrap, topic, group), max_poll_interval_ms=6_000)
    driven.append(member)
    member.until(lambda: len(member.records) == 1, "the record")
    refused: list[BaseException] = []

    def commit_on_revoke(tps: list[TP]) -> None:
        try:
            member.source.commit({(topic, 0): 1})
        except CommitError as exc:
            refused.append(exc)

    member.on_revoke = commit_on_revoke
    time.sleep(8)  # past max.poll.interval.ms: librdkafka leaves the group
    member.until(lambda: len(member.records) == 2, "the revocation, a new assignment and the record again", 60)
    assert member.events[2:] == [("revoked", [(topic, 0)]), ("assigned", [(topic, 0)])]
    assert len(refused) == 1, "the evicted member's commit is refused"
    assert committed(kafka_bootstrap, group, topic, 1) == {0: None}
    assert [r.offset for r in member.records] == [0, 0], "nothing committed: read again from the earliest"


# ------------------------------------------------------------------ TLS and SASL through the test endpoint


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


def _through(proxy: TlsKafkaProxy, kafka: KafkaSettings, driven: list[Driven], **config: Any) -> Driven:
    """Produce two records with kafka-python and the same security settings, then consume them in a group."""
    producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, acks="all", **build_security(kafka).kwargs())
    try:
        for i in range(2):
            producer.send(kafka.spans_topic, value=b"secure-%d" % i, partition=0).get(10)
    finally:
        producer.close()
    member = Driven(kafka, **config)
    driven.append(member)
    member.until(lambda: len(member.records) == 2, "the records over TLS")
    member.source.commit({(kafka.spans_topic, 0): 2})
    assert [r.value for r in member.records] == [b"secure-0", b"secure-1"]
    return member


def test_sasl_ssl_scram_joins_consumes_and_commits_and_the_password_stays_out_of_the_debug_log(
    tmp_path: Path, pki: Pki, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, driven: list[Driven]
) -> None:
    monkeypatch.setenv("KAFKA_PW", PASSWORD)
    caplog.set_level(logging.DEBUG, logger="kafka")
    with tls_tansu(tmp_path, pki.server_context(), sasl_users={"monitor": PASSWORD}) as proxy:
        topic, group = names("cf-scram")
        kafka = settings(
            proxy.bootstrap,
            topic,
            group,
            security_protocol="SASL_SSL",
            tls={"ca_file": str(pki.ca.cert)},
            sasl={"mechanism": "SCRAM-SHA-512", "username": "monitor", "password_env": "KAFKA_PW"},
        )
        handshakes = proxy.stats.handshakes
        _through(proxy, kafka, driven, debug="security,conf,broker")
        assert proxy.stats.handshakes > handshakes
        assert ("SCRAM-SHA-512", "monitor") in proxy.stats.authenticated
        driven[-1].source.close()
    debug = [r.getMessage() for r in caplog.records if r.name == "kafka.librdkafka"]
    assert any("SASL" in line or "sasl" in line for line in debug), "librdkafka's debug lines were captured"
    assert not [line for line in debug if PASSWORD in line]


def test_mutual_tls_with_an_encrypted_key_joins_consumes_and_commits(
    tmp_path: Path, pki: Pki, driven: list[Driven]
) -> None:
    key_password = tmp_path / "key-password"
    key_password.write_text(Pki.CLIENT_KEY_PASSWORD)
    with tls_tansu(tmp_path, pki.server_context(client_ca=pki.client_ca.cert)) as proxy:
        topic, group = names("cf-mtls")
        kafka = settings(
            proxy.bootstrap,
            topic,
            group,
            security_protocol="SSL",
            tls={
                "ca_file": str(pki.ca.cert),
                "cert_file": str(pki.client_encrypted.cert),
                "key_file": str(pki.client_encrypted.key),
                "key_password_file": str(key_password),
            },
        )
        _through(proxy, kafka, driven)
        driven[-1].source.close()


def test_oauthbearer_with_a_token_file_sends_the_token_and_its_extensions(
    tmp_path: Path, pki: Pki, driven: list[Driven]
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("oauth-token-cf-1")
    with tls_tansu(tmp_path, pki.server_context(), oauth_tokens={"oauth-token-cf-1": "svc-monitor"}) as proxy:
        topic, group = names("cf-oauth")
        kafka = settings(
            proxy.bootstrap,
            topic,
            group,
            security_protocol="SASL_SSL",
            tls={"ca_file": str(pki.ca.cert)},
            sasl={
                "mechanism": "OAUTHBEARER",
                "oauth": {"token_file": str(token_file), "extensions": {"logicalCluster": "lkc-7"}},
            },
        )
        _through(proxy, kafka, driven)
        driven[-1].source.close()
        assert ("OAUTHBEARER", "svc-monitor") in proxy.stats.authenticated
        assert {"logicalCluster": "lkc-7"} in proxy.stats.oauth_extensions
