"""Kafka security: the settings, the kafka-python arguments built from them, and real TLS + SASL handshakes.

What runs for real here: kafka-python's TLS client (Python's ``ssl``) against a TLS-terminating proxy in front of
Tansu (:mod:`tests.support.tls_proxy`), and kafka-python's SASL clients (PLAIN, SCRAM-SHA-256/512, OAUTHBEARER)
against that proxy's SASL authenticator (test code, not a Kafka broker's), records produced and consumed through
both; the OAuth client-credentials grant against a real local HTTP token endpoint. The settings checks are
checked on what kafka-python receives.
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.net.sasl.oauth import AbstractTokenProvider

from monitor.cli import main
from monitor.ingest.consumer import KafkaSource
from monitor.ingest.dlq import DeadLetterQueue, make_dead_letter
from monitor.ingest.security import (
    ClientCredentialsTokenProvider,
    FileTokenProvider,
    KafkaSecurityError,
    TokenError,
    build_security,
    check_security,
)
from monitor.preflight import check_brokers, preflight
from monitor.settings import DeadLetterSettings, KafkaSettings, Settings, SettingsError, load_settings
from tests.support.daemon import names
from tests.support.tls_proxy import Pki, TlsKafkaProxy, tls_tansu

PASSWORD = "pw-Zq8r-sasl"
TOKEN = "oauth-token-7c1d"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[TlsKafkaProxy]:
    """Tansu behind TLS + SASL (PLAIN, SCRAM-SHA-256/512 for user ``monitor``, OAUTHBEARER for ``TOKEN``)."""
    with tls_tansu(
        tmp_path_factory.mktemp("tansu-sasl"),
        pki.server_context(),
        sasl_users={"monitor": PASSWORD},
        oauth_tokens={TOKEN: "svc-monitor"},
    ) as proxy:
        yield proxy


def kafka(**values: Any) -> KafkaSettings:
    return load_settings(kafka=values).kafka


def problems_of(**values: Any) -> list[str]:
    with pytest.raises(SettingsError) as info:
        load_settings(kafka=values)
    return info.value.problems


# ------------------------------------------------------------------ settings: every bad combination names its key


@pytest.mark.parametrize(
    ("values", "key", "words"),
    [
        ({"tls": {"ca_file": "/ca.pem"}}, "kafka.security_protocol = 'PLAINTEXT'", "kafka.tls.ca_file is set"),
        (
            {
                "security_protocol": "SASL_PLAINTEXT",
                "sasl": {"mechanism": "PLAIN", "username": "u", "password_env": "P"},
                "tls": {"check_hostname": False},
            },
            "kafka.security_protocol = 'SASL_PLAINTEXT'",
            "kafka.tls.check_hostname is set",
        ),
        ({"security_protocol": "SASL_SSL"}, "kafka.security_protocol = 'SASL_SSL'", "needs kafka.sasl.mechanism"),
        (
            {"security_protocol": "SSL", "sasl": {"mechanism": "PLAIN", "username": "u", "password_env": "P"}},
            "kafka.security_protocol = 'SSL'",
            "does not authenticate with SASL",
        ),
        (
            {"security_protocol": "SASL_SSL", "sasl": {"mechanism": "SCRAM-SHA-256", "password_env": "P"}},
            "kafka.sasl.username = None",
            "needs a username",
        ),
        (
            {"security_protocol": "SASL_SSL", "sasl": {"mechanism": "SCRAM-SHA-512", "username": "u"}},
            "kafka.sasl.password_file = None",
            "needs a password",
        ),
        (
            {
                "security_protocol": "SASL_SSL",
                "sasl": {"mechanism": "PLAIN", "username": "u", "password_env": "P", "password_file": "/p"},
            },
            "kafka.sasl.password_file",
            "not both",
        ),
        (
            {"security_protocol": "SASL_SSL", "sasl": {"mechanism": "OAUTHBEARER"}},
            "kafka.sasl.mechanism = 'OAUTHBEARER'",
            "needs a token",
        ),
        (
            {
                "security_protocol": "SASL_SSL",
                "sasl": {
                    "mechanism": "OAUTHBEARER",
                    "oauth": {"endpoint_url": "http://idp.example/token", "client_id": "c", "client_secret_env": "S"},
                },
            },
            "kafka.sasl.oauth.endpoint_url",
            "not an https:// URL",
        ),
        (
            {
                "security_protocol": "SASL_SSL",
                "sasl": {"mechanism": "OAUTHBEARER", "oauth": {"endpoint_url": "https://idp.example/token"}},
            },
            "kafka.sasl.oauth.client_id = None",
            "needs a client_id",
        ),
        ({"security_protocol": "SSL", "tls": {"key_file": "/k.pem"}}, "kafka.tls.key_file", "needs cert_file"),
        (
            {
                "security_protocol": "SASL_SSL",
                "sasl": {"mechanism": "PLAIN", "username": "u", "password_env": "P", "oauth": {"token_file": "/t"}},
            },
            "kafka.sasl.mechanism = 'PLAIN'",
            "only OAUTHBEARER uses it",
        ),
    ],
)
def test_bad_security_settings_name_the_key_the_value_and_the_fix(values: dict[str, Any], key: str, words: str) -> None:
    problems = problems_of(**values)
    assert any(p.startswith(key) and words in p and ". Fix: " in p for p in problems), problems


def test_a_secret_pasted_where_a_variable_name_belongs_is_rejected_and_never_quoted() -> None:
    (problem,) = problems_of(
        security_protocol="SASL_SSL", sasl={"mechanism": "PLAIN", "username": "u", "password_env": "hunter 2!x"}
    )[:1]
    assert problem.startswith("kafka.sasl.password_env = '***'") and "hunter" not in problem


def test_an_env_variable_names_the_setting_in_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONITOR_KAFKA__SECURITY_PROTOCOL", "SASL_SSL")
    with pytest.raises(SettingsError) as info:
        load_settings()
    assert info.value.problems[0].startswith("MONITOR_KAFKA__SECURITY_PROTOCOL = 'SASL_SSL'")


def test_plaintext_is_the_default_and_adds_nothing_but_the_protocol() -> None:
    assert build_security(KafkaSettings()).kwargs() == {"security_protocol": "PLAINTEXT"}


# ------------------------------------------------------------------ what kafka-python receives


def test_tls_settings_become_one_verifying_ssl_context(pki: Pki) -> None:
    security = build_security(kafka(security_protocol="SSL", tls={"ca_file": str(pki.ca.cert)}))
    kwargs = security.kwargs()
    assert set(kwargs) == {"security_protocol", "ssl_context"} and kwargs["security_protocol"] == "SSL"
    ctx = kwargs["ssl_context"]
    assert isinstance(ctx, ssl.SSLContext) and ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    assert any(c["subject"] == ((("commonName", "brokers"),),) for c in ctx.get_ca_certs())
    off = build_security(kafka(security_protocol="SSL", tls={"ca_file": str(pki.ca.cert), "check_hostname": False}))
    assert off.kwargs()["ssl_context"].check_hostname is False
    assert off.kwargs()["ssl_context"].verify_mode == ssl.CERT_REQUIRED  # the chain is still verified


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_password_comes_from_the_variable_or_the_file(
    mechanism: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pki: Pki
) -> None:
    monkeypatch.setenv("KAFKA_PW", PASSWORD)
    from_env = build_security(
        kafka(
            security_protocol="SASL_SSL",
            tls={"ca_file": str(pki.ca.cert)},
            sasl={"mechanism": mechanism, "username": "monitor", "password_env": "KAFKA_PW"},
        )
    ).kwargs()
    assert from_env["sasl_mechanism"] == mechanism and from_env["sasl_plain_username"] == "monitor"
    assert from_env["sasl_plain_password"] == PASSWORD and "ssl_context" in from_env
    secret = tmp_path / "password"
    secret.write_text(PASSWORD + "\n")  # a mounted Secret often ends with a newline
    from_file = build_security(
        kafka(
            security_protocol="SASL_PLAINTEXT",
            sasl={"mechanism": mechanism, "username": "monitor", "password_file": str(secret)},
        )
    ).kwargs()
    assert from_file["sasl_plain_password"] == PASSWORD and "ssl_context" not in from_file


def test_oauth_token_file_is_read_again_whenever_it_changes(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("first-token\n")
    kwargs = build_security(
        kafka(
            security_protocol="SASL_SSL",
            sasl={
                "mechanism": "OAUTHBEARER",
                "oauth": {"token_file": str(token_file), "extensions": {"logicalCluster": "lkc-1"}},
            },
        )
    ).kwargs()
    provider = kwargs["sasl_oauth_token_provider"]
    assert isinstance(provider, FileTokenProvider) and isinstance(provider, AbstractTokenProvider)
    assert kwargs["sasl_mechanism"] == "OAUTHBEARER" and "sasl_plain_password" not in kwargs
    assert provider.token() == "first-token" and provider.extensions() == {"logicalCluster": "lkc-1"}
    token_file.write_text("second-token-longer\n")
    assert provider.token() == "second-token-longer"
    token_file.unlink()
    with pytest.raises(TokenError, match="cannot read the token file"):
        provider.token()


# ------------------------------------------------------------------ files and secrets that cannot be used


def test_unusable_files_and_secrets_are_configuration_problems(tmp_path: Path, pki: Pki) -> None:
    not_pem = tmp_path / "ca.txt"
    not_pem.write_text("not a certificate\n")
    empty = tmp_path / "empty"
    empty.write_text("\n")
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"tls": {"ca_file": str(tmp_path / "missing.pem")}}, "kafka.tls.ca_file", "does not exist"),
        ({"tls": {"ca_file": str(tmp_path)}}, "kafka.tls.ca_file", "is a directory"),
        ({"tls": {"ca_file": str(not_pem)}}, "kafka.tls.ca_file", "holds no PEM CA certificate"),
        (
            {"tls": {"cert_file": str(pki.client.cert), "key_file": str(pki.stranger.key)}},
            "kafka.tls.key_file",
            "does not belong to the certificate",
        ),
        (
            {"tls": {"cert_file": str(pki.client_encrypted.cert), "key_file": str(pki.client_encrypted.key)}},
            "kafka.tls.key_file",
            "encrypted and no password is configured",
        ),
        (
            {
                "tls": {
                    "cert_file": str(pki.client_encrypted.cert),
                    "key_file": str(pki.client_encrypted.key),
                    "key_password_file": str(empty),
                }
            },
            "kafka.tls.key_password_file",
            "the file is empty",
        ),
        (
            {
                "tls": {
                    "cert_file": str(pki.client_encrypted.cert),
                    "key_file": str(pki.client_encrypted.key),
                    "key_password_env": "MONITOR_TEST_NO_SUCH_VAR",
                }
            },
            "kafka.tls.key_password_env = 'MONITOR_TEST_NO_SUCH_VAR'",
            "is unset or empty",
        ),
    ]
    for tls, key, words in cases:
        problems = check_security(kafka(security_protocol="SSL", **tls))
        assert len(problems) == 1 and problems[0].startswith(key) and words in problems[0], (tls, problems)
        assert ". Fix: " in problems[0]
    wrong = tmp_path / "wrong-password"
    wrong.write_text("not-the-password")
    (problem,) = check_security(
        kafka(
            security_protocol="SSL",
            tls={
                "cert_file": str(pki.client_encrypted.cert),
                "key_file": str(pki.client_encrypted.key),
                "key_password_file": str(wrong),
            },
        )
    )
    assert problem.startswith("kafka.tls.key_password_file") and "does not decrypt" in problem
    assert "not-the-password" not in problem
    sasl_problems = check_security(
        kafka(
            security_protocol="SASL_SSL",
            sasl={"mechanism": "SCRAM-SHA-512", "username": "u", "password_file": str(tmp_path / "nope")},
        )
    )
    assert sasl_problems[0].startswith("kafka.sasl.password_file") and "does not exist" in sasl_problems[0]
    with pytest.raises(KafkaSecurityError):  # the clients refuse to start the same way
        DeadLetterQueue(
            kafka(security_protocol="SSL", tls={"ca_file": str(tmp_path / "missing.pem")}), DeadLetterSettings()
        )


def test_an_encrypted_key_loads_with_its_password_and_preflight_lists_security_problems(
    tmp_path: Path, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLIENT_KEY_PW", Pki.CLIENT_KEY_PASSWORD)
    ok = kafka(
        security_protocol="SSL",
        tls={
            "ca_file": str(pki.ca.cert),
            "cert_file": str(pki.client_encrypted.cert),
            "key_file": str(pki.client_encrypted.key),
            "key_password_env": "CLIENT_KEY_PW",
        },
    )
    assert check_security(ok) == []
    bad = load_settings(
        kafka={"security_protocol": "SSL", "tls": {"ca_file": str(tmp_path / "gone.pem")}}, http={"port": 0}
    )
    report = preflight(bad)  # the broker check is not tried with settings that cannot be used
    assert report.exit_code == 2
    assert any(p.startswith("kafka.tls.ca_file") for p in report.problems)
    assert report.brokers is not None and "not tried" in report.brokers and "kafka.tls.ca_file" in report.brokers


# ------------------------------------------------------------------ secrets never shown


def test_secrets_stay_out_of_config_output_repr_and_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], pki: Pki
) -> None:
    monkeypatch.setenv("KAFKA_PW", PASSWORD)
    cfg = tmp_path / "monitor.yaml"
    cfg.write_text(
        "kafka:\n  security_protocol: SASL_SSL\n"
        f"  tls:\n    ca_file: {pki.ca.cert}\n"
        "  sasl:\n    mechanism: SCRAM-SHA-512\n    username: monitor\n    password_env: KAFKA_PW\n"
        "http:\n  port: 0\n"
    )
    assert main(["config", "--config", str(cfg), "--no-broker-check"]) == 0
    out, err = capsys.readouterr()
    assert "SCRAM-SHA-512" in out and "configuration valid" in err
    assert PASSWORD not in out + err
    settings = load_settings(cfg)
    security = build_security(settings.kafka)
    assert PASSWORD not in repr(settings) + str(settings.masked_dump()) + repr(security)
    assert "password='***'" in repr(security)


def test_secrets_are_scrubbed_from_kafka_python_debug_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, pki: Pki
) -> None:
    """kafka-python logs each SASL request at DEBUG (``log_client_debug``): PLAIN's carries the password."""
    secret = tmp_path / "password"
    secret.write_text(PASSWORD)
    with tls_tansu(tmp_path, None, sasl_users={"monitor": PASSWORD}) as proxy:
        settings = kafka(
            bootstrap_servers=proxy.bootstrap,
            security_protocol="SASL_PLAINTEXT",
            sasl={"mechanism": "PLAIN", "username": "monitor", "password_file": str(secret)},
        )
        with caplog.at_level(logging.DEBUG, logger="kafka"):
            producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, **build_security(settings).kwargs())
            producer.send(names("scrub")[0], b"x").get(10)
            producer.close()
        assert ("PLAIN", "monitor") in proxy.stats.authenticated
    text = caplog.text
    assert "SaslAuthenticateRequest" in text  # the request was logged…
    assert PASSWORD not in text and "***" in text  # …without the password


# ------------------------------------------------------------------ real SASL handshakes (TLS + SASL proxy)


def _roundtrip(bootstrap: str, settings: KafkaSettings, topic: str) -> list[bytes]:
    """Produce one record and read it back (``assign()``: no group join), both with the settings' security."""
    kwargs = build_security(settings).kwargs()
    producer = KafkaProducer(bootstrap_servers=bootstrap, **kwargs)
    try:
        producer.send(topic, b"hello " + topic.encode(), partition=0).get(10)
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", **kwargs)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        out: list[bytes] = []
        deadline = time.monotonic() + 10
        while not out and time.monotonic() < deadline:
            out += [r.value for recs in consumer.poll(timeout_ms=200).values() for r in recs]
        return out
    finally:
        consumer.close()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_ssl_with_a_password_produces_and_consumes(
    mechanism: str, sasl_broker: TlsKafkaProxy, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAFKA_PW", PASSWORD)
    settings = kafka(
        bootstrap_servers=sasl_broker.bootstrap,
        security_protocol="SASL_SSL",
        tls={"ca_file": str(pki.ca.cert)},
        sasl={"mechanism": mechanism, "username": "monitor", "password_env": "KAFKA_PW"},
    )
    topic = names(f"sasl-{mechanism.lower()}")[0]
    assert _roundtrip(sasl_broker.bootstrap, settings, topic) == [b"hello " + topic.encode()]
    assert (mechanism, "monitor") in sasl_broker.stats.authenticated


def test_wrong_sasl_password_is_reported_by_the_broker_check(
    sasl_broker: TlsKafkaProxy, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAFKA_PW", "not-the-password")
    settings = load_settings(
        kafka={
            "bootstrap_servers": sasl_broker.bootstrap,
            "security_protocol": "SASL_SSL",
            "tls": {"ca_file": str(pki.ca.cert)},
            "sasl": {"mechanism": "SCRAM-SHA-512", "username": "monitor", "password_env": "KAFKA_PW"},
            "startup_timeout_s": 3,
        }
    )
    line = check_brokers(settings)
    assert line is not None and "cannot authenticate" in line and "SCRAM-SHA-512" in line, line
    assert "kafka.sasl.username = 'monitor'" in line and "kafka.sasl.password_env" in line
    assert "not-the-password" not in line


def test_oauthbearer_with_a_token_file_produces_consumes_and_sends_the_extensions(
    sasl_broker: TlsKafkaProxy, pki: Pki, tmp_path: Path
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    settings = kafka(
        bootstrap_servers=sasl_broker.bootstrap,
        security_protocol="SASL_SSL",
        tls={"ca_file": str(pki.ca.cert)},
        sasl={
            "mechanism": "OAUTHBEARER",
            "oauth": {"token_file": str(token_file), "extensions": {"logicalCluster": "lkc-42"}},
        },
    )
    topic = names("oauth-file")[0]
    assert _roundtrip(sasl_broker.bootstrap, settings, topic) == [b"hello " + topic.encode()]
    assert ("OAUTHBEARER", "svc-monitor") in sasl_broker.stats.authenticated
    assert {"logicalCluster": "lkc-42"} in sasl_broker.stats.oauth_extensions


# ------------------------------------------------------------------ OAuth client-credentials grant (real HTTP)


class _TokenEndpoint:
    """A local OAuth 2 token endpoint: answers the client-credentials grant of one client with TOKEN."""

    def __init__(self, client_id: str, secret: str, expires_in: int = 3600) -> None:
        self.requests: list[dict[str, Any]] = []
        self.expires_in = expires_in
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
                form = dict(urllib.parse.parse_qsl(body))
                auth = self.headers.get("Authorization", "")
                user, _, password = base64.b64decode(auth.removeprefix("Basic ")).decode().partition(":")
                endpoint.requests.append({"form": form, "client": urllib.parse.unquote(user)})
                ok = urllib.parse.unquote(user) == client_id and urllib.parse.unquote(password) == secret
                if not ok or form.get("grant_type") != "client_credentials":
                    doc: dict[str, Any] = {"error": "invalid_client", "error_description": "bad client credentials"}
                    status = 401
                else:
                    doc = {"access_token": TOKEN, "token_type": "Bearer", "expires_in": endpoint.expires_in}
                    status = 200
                payload = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/oauth2/token"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _TokenEndpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_client_credentials_provider_fetches_caches_and_refreshes_tokens() -> None:
    secret = "client-secret-9d/+x"
    with _TokenEndpoint("monitor", secret, expires_in=120) as idp:
        now = [1000.0]
        provider = ClientCredentialsTokenProvider(
            idp.url, "monitor", secret, scope="kafka", refresh_margin_s=60, clock=lambda: now[0]
        )
        assert provider.token() == TOKEN and provider.token() == TOKEN
        assert provider.fetches == 1  # cached
        assert idp.requests[0] == {"form": {"grant_type": "client_credentials", "scope": "kafka"}, "client": "monitor"}
        now[0] += 61  # within refresh_margin_s of expiry
        assert provider.token() == TOKEN and provider.fetches == 2
        wrong = ClientCredentialsTokenProvider(idp.url, "monitor", "wrong-secret-123")
        with pytest.raises(TokenError, match="HTTP 401: invalid_client bad client credentials") as info:
            wrong.token()
        assert "wrong-secret-123" not in str(info.value) and secret not in repr(provider)


def test_oauthbearer_client_credentials_end_to_end(
    sasl_broker: TlsKafkaProxy, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OAUTH_SECRET", "s3cr3t-client")
    with _TokenEndpoint("monitor-app", "s3cr3t-client") as idp:
        settings = kafka(
            bootstrap_servers=sasl_broker.bootstrap,
            security_protocol="SASL_SSL",
            tls={"ca_file": str(pki.ca.cert)},
            sasl={
                "mechanism": "OAUTHBEARER",
                "oauth": {
                    "endpoint_url": idp.url,
                    "client_id": "monitor-app",
                    "client_secret_env": "OAUTH_SECRET",
                    "scope": "kafka",
                    "extensions": {"identityPoolId": "pool-1"},
                },
            },
        )
        provider = build_security(settings).kwargs()["sasl_oauth_token_provider"]
        assert isinstance(provider, ClientCredentialsTokenProvider)
        topic = names("oauth-cc")[0]
        assert _roundtrip(sasl_broker.bootstrap, settings, topic) == [b"hello " + topic.encode()]
        assert idp.requests and all(r["client"] == "monitor-app" for r in idp.requests)
        assert {"identityPoolId": "pool-1"} in sasl_broker.stats.oauth_extensions


# ------------------------------------------------------------------ the three clients use the same arguments


def test_consumer_dead_letter_producer_and_probe_all_connect_with_the_security_settings(
    sasl_broker: TlsKafkaProxy, pki: Pki, tmp_path: Path
) -> None:
    secret = tmp_path / "password"
    secret.write_text(PASSWORD)
    topic, group = names("sec-clients")
    settings = Settings(
        kafka={  # type: ignore[arg-type]
            "bootstrap_servers": sasl_broker.bootstrap,
            "spans_topic": topic,
            "group_id": group,
            "session_timeout_ms": 6000,
            "heartbeat_interval_ms": 500,
            "security_protocol": "SASL_SSL",
            "tls": {"ca_file": str(pki.ca.cert)},
            "sasl": {"mechanism": "SCRAM-SHA-256", "username": "monitor", "password_file": str(secret)},
        }
    )
    before = len(sasl_broker.stats.authenticated)
    assert check_brokers(settings) is None  # the probe: TLS handshake, ApiVersions, then kafka-python over SASL
    dlq = DeadLetterQueue(settings.kafka, DeadLetterSettings())
    try:
        dlq.check_topics([topic])
        letter = make_dead_letter(
            topic=topic, partition=0, offset=0, key=b"k", value=b"\xff", headers=None, reason="invalid", detail="x"
        )
        assert dlq.send(letter) and dlq.flush(20) == [letter]
    finally:
        dlq.close()
    source = KafkaSource(settings.kafka, lambda _: None, lambda _: None)
    try:
        deadline = time.monotonic() + 20
        while not source.assignment() and time.monotonic() < deadline:
            source.poll(200)
        assert source.assignment()
    finally:
        source.close()
    assert len(sasl_broker.stats.authenticated) - before >= 4
    assert {m for m, _ in sasl_broker.stats.authenticated[before:]} == {"SCRAM-SHA-256"}
