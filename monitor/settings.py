"""Every setting of the monitor in one catalogue.

Sources, highest priority first: keyword arguments, ``MONITOR_*`` environment variables (nested
keys joined with ``__``: ``MONITOR_KAFKA__BOOTSTRAP_SERVERS``), the YAML file given to
:func:`load_settings` (or ``MONITOR_CONFIG``), then the defaults below. A bad value raises
:class:`SettingsError`, whose message has one line per problem, ``<name> = <value>: <problem>. Fix:
<fix>``, where ``<name>`` is the environment variable when the value came from one (else the dotted
file key). Checks that need more than the values themselves (files, the scorer registry, the
store driver, the HTTP address, the brokers) live in :mod:`monitor.preflight`: settings sit below
every other package of the monitor and import none of them (``[tool.importlinter]`` in pyproject).

Secrets: values are never shown in clear. :func:`mask_url` and :func:`mask_secrets` replace URL
passwords and secret-looking parameters (``password``, ``token``, ``secret``, ``key``…) with
``***``; :meth:`Settings.masked_dump` is what ``monitor config`` prints, and every value quoted in a
:class:`SettingsError` is masked. The Anthropic API key of the judges is never a setting: ``judge`` names the
variable or the file that holds it (:meth:`JudgeSettings.api_key` reads it, as a ``SecretStr``); a key pasted
into the configuration is rejected without being quoted, and ``sk-ant-…`` keys are masked in any text.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from pathlib import Path
from typing import Annotated, Any, Final, Literal, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PrivateAttr,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

ENV_PREFIX = "MONITOR_"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


KafkaSecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
KafkaSaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
_PASSWORD_MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_LOOPBACK_URL = re.compile(r"http://(localhost|127\.\d+\.\d+\.\d+|\[::1\])(:\d+)?(/|$)")
_SASL_EXTENSION_KEY = re.compile(r"[A-Za-z]+")


def _secret_source(value: str | None) -> str | None:
    """A ``*_env`` setting: the name of the variable holding a secret, never the secret itself."""
    if value is not None and not _ENV_NAME.fullmatch(value):
        raise ValueError(
            "not an environment variable name (letters, digits and '_'); give the variable's name, never the secret"
        )
    return value


def _configured(section: BaseModel) -> list[str]:
    """The keys of ``section`` given a value other than their default."""
    fields = type(section).model_fields
    return [
        name for name, info in fields.items() if getattr(section, name) != info.get_default(call_default_factory=True)
    ]


def _one_source(env: str | None, file: Path | None, what: str, env_key: str, file_key: str) -> None:
    if env is not None and file is not None:
        raise ValueError(f"{what} comes from {env_key} or {file_key}, not both: remove one")


class KafkaTlsSettings(_Section):
    """TLS to the brokers (``kafka.security_protocol`` SSL or SASL_SSL). Files are PEM; the key's password is
    never a setting: ``key_password_env`` names the variable holding it, ``key_password_file`` a file (a mounted
    Secret). ``monitor config`` and ``monitor run`` check that the files exist and load (``monitor.preflight``)."""

    ca_file: Path | None = Field(
        None,
        description="PEM file of the CA certificate(s) that signed the brokers' certificates (default: system CAs)",
    )
    cert_file: Path | None = Field(
        None, description="PEM client certificate for mutual TLS (may hold the private key too)"
    )
    key_file: Path | None = Field(None, description="PEM private key of cert_file (default: read from cert_file)")
    key_password_env: str | None = Field(
        None, description="name of the environment variable holding the private key's password (not the password)"
    )
    key_password_file: Path | None = Field(
        None,
        validate_default=True,
        description="file holding the private key's password, e.g. a mounted Kubernetes Secret",
    )
    check_hostname: bool = Field(
        True, description="check that each broker's certificate names the host connected to (keep true)"
    )

    @field_validator("key_file")
    @classmethod
    def _key_needs_cert(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        if value is not None and "cert_file" in info.data and info.data["cert_file"] is None:
            raise ValueError(
                "key_file needs cert_file (the client certificate the key belongs to): set both, or neither"
            )
        return value

    @field_validator("key_password_env")
    @classmethod
    def _key_password_env(cls, value: str | None) -> str | None:
        return _secret_source(value)

    @field_validator("key_password_file")
    @classmethod
    def _key_password_source(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        env = info.data.get("key_password_env")
        _one_source(env, value, "the key's password", "key_password_env", "key_password_file")
        if (env is not None or value is not None) and "cert_file" in info.data and info.data["cert_file"] is None:
            raise ValueError("a key password is only used with cert_file (mutual TLS): set cert_file, or remove it")
        return value

    def configured(self) -> list[str]:
        """The keys given a value other than their default."""
        return _configured(self)


class KafkaOAuthSettings(_Section):
    """Where SASL/OAUTHBEARER gets its token: a file re-read whenever it changes (a token refreshed by a sidecar,
    a projected service-account token), or the OAuth 2 client-credentials grant against ``endpoint_url``."""

    token_file: Path | None = Field(
        None, description="file holding the bearer token, re-read whenever it changes (or endpoint_url instead)"
    )
    endpoint_url: str | None = Field(
        None, description="OAuth 2 token endpoint (https://…) for the client-credentials grant (or token_file instead)"
    )
    client_id: str | None = Field(
        None, min_length=1, validate_default=True, description="client id of the client-credentials grant"
    )
    client_secret_env: str | None = Field(
        None, description="name of the environment variable holding the client secret (not the secret)"
    )
    client_secret_file: Path | None = Field(
        None, validate_default=True, description="file holding the client secret, e.g. a mounted Kubernetes Secret"
    )
    scope: str | None = Field(None, min_length=1, description="scope requested with the client-credentials grant")
    extensions: dict[str, str] = Field(
        default_factory=dict,
        description="SASL extensions sent with the token (Confluent Cloud: logicalCluster, identityPoolId)",
    )
    refresh_margin_s: float = Field(60.0, ge=0, description="fetch a new token this long before the current expires")
    timeout_s: float = Field(10.0, gt=0, le=120, description="a token endpoint request gives up after this long")

    @field_validator("endpoint_url")
    @classmethod
    def _endpoint(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return value
        if not (re.match(r"https://[^/\s]+", value) or _LOOPBACK_URL.match(value)):
            raise ValueError(
                f"{value!r} is not an https:// URL (plain http:// only to localhost): the client secret travels in it"
            )
        if info.data.get("token_file") is not None:
            raise ValueError("the token comes from token_file or endpoint_url, not both: remove one")
        return value

    @field_validator("client_id")
    @classmethod
    def _client_id(cls, value: str | None, info: ValidationInfo) -> str | None:
        if "endpoint_url" not in info.data:
            return value
        if info.data["endpoint_url"] is not None and value is None:
            raise ValueError("the client-credentials grant (endpoint_url) needs a client_id")
        if info.data["endpoint_url"] is None and value is not None:
            raise ValueError("client_id is only used with endpoint_url (the client-credentials grant)")
        return value

    @field_validator("client_secret_env")
    @classmethod
    def _client_secret_env(cls, value: str | None) -> str | None:
        return _secret_source(value)

    @field_validator("client_secret_file")
    @classmethod
    def _client_secret_source(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        env = info.data.get("client_secret_env")
        _one_source(env, value, "the client secret", "client_secret_env", "client_secret_file")
        if "endpoint_url" not in info.data:
            return value
        given = env is not None or value is not None
        if info.data["endpoint_url"] is not None and not given:
            raise ValueError(
                "the client-credentials grant (endpoint_url) needs the client secret: set client_secret_file "
                "(a mounted Secret) or client_secret_env (the variable's name)"
            )
        if info.data["endpoint_url"] is None and given:
            raise ValueError("a client secret is only used with endpoint_url (the client-credentials grant)")
        return value

    @field_validator("extensions")
    @classmethod
    def _extensions(cls, value: dict[str, str]) -> dict[str, str]:
        for key, text in value.items():
            if not _SASL_EXTENSION_KEY.fullmatch(key) or key == "auth":
                raise ValueError(f"extension name {key!r} must be letters only, and not 'auth' (RFC 7628)")
            if "\x01" in text:
                raise ValueError(f"the value of extension {key!r} must not contain the byte \\x01")
        return value

    def configured(self) -> list[str]:
        """The keys given a value other than their default."""
        return _configured(self)


class KafkaSaslSettings(_Section):
    """SASL authentication to the brokers (``kafka.security_protocol`` SASL_SSL, or SASL_PLAINTEXT on a trusted
    network). The password is never a setting: ``password_env`` names the variable holding it, ``password_file`` a
    file (a mounted Secret); both are read when a client is built and never logged."""

    # declared first so that the check of mechanism sees it (and names mechanism in its error)
    oauth: KafkaOAuthSettings = Field(
        default_factory=KafkaOAuthSettings,  # type: ignore[arg-type]
        description="OAUTHBEARER: the token from a file or from the client-credentials grant",
    )
    mechanism: KafkaSaslMechanism | None = Field(
        None, validate_default=True, description="PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER"
    )
    username: str | None = Field(
        None, min_length=1, validate_default=True, description="user name (PLAIN, SCRAM); Confluent Cloud: the API key"
    )
    password_env: str | None = Field(
        None, description="name of the environment variable holding the password (PLAIN, SCRAM), not the password"
    )
    password_file: Path | None = Field(
        None,
        validate_default=True,
        description="file holding the password (PLAIN, SCRAM), e.g. a mounted Kubernetes Secret",
    )

    @field_validator("mechanism")
    @classmethod
    def _oauth_source(cls, value: str | None, info: ValidationInfo) -> str | None:
        oauth = info.data.get("oauth")
        if not isinstance(oauth, KafkaOAuthSettings):
            return value
        if value == "OAUTHBEARER" and oauth.token_file is None and oauth.endpoint_url is None:
            raise ValueError(
                "OAUTHBEARER needs a token: set kafka.sasl.oauth.token_file, or kafka.sasl.oauth.endpoint_url with "
                "oauth.client_id and the client secret (the client-credentials grant)"
            )
        if value != "OAUTHBEARER" and oauth.configured():
            raise ValueError(f"kafka.sasl.oauth.{oauth.configured()[0]} is set but only OAUTHBEARER uses it")
        return value

    @field_validator("username")
    @classmethod
    def _username(cls, value: str | None, info: ValidationInfo) -> str | None:
        if "mechanism" not in info.data:
            return value
        mechanism = info.data["mechanism"]
        if mechanism in _PASSWORD_MECHANISMS and value is None:
            raise ValueError(f"mechanism {mechanism} needs a username")
        if mechanism not in _PASSWORD_MECHANISMS and value is not None:
            raise ValueError(f"username is only used by PLAIN and SCRAM, not by mechanism {mechanism}")
        return value

    @field_validator("password_env")
    @classmethod
    def _password_env(cls, value: str | None) -> str | None:
        return _secret_source(value)

    @field_validator("password_file")
    @classmethod
    def _password_source(cls, value: Path | None, info: ValidationInfo) -> Path | None:
        env = info.data.get("password_env")
        _one_source(env, value, "the password", "password_env", "password_file")
        if "mechanism" not in info.data:
            return value
        mechanism, given = info.data["mechanism"], env is not None or value is not None
        if mechanism in _PASSWORD_MECHANISMS and not given:
            raise ValueError(
                f"mechanism {mechanism} needs a password: set password_file (a mounted Secret) or password_env "
                "(the name of the variable holding it)"
            )
        if mechanism not in _PASSWORD_MECHANISMS and given:
            raise ValueError(f"a password is only used by PLAIN and SCRAM, not by mechanism {mechanism}")
        return value


class KafkaSettings(_Section):
    bootstrap_servers: str = Field("127.0.0.1:9092", description="host:port[,host:port…] of the Kafka brokers")
    spans_topic: str = Field("otlp_spans", min_length=1, description="topic the Collector's Kafka exporter writes")
    logs_topic: str | None = Field(None, description="optional topic of OTLP logs carrying GenAI events")
    group_id: str = Field("agent-tool-monitor", min_length=1, description="consumer group id")
    client: Literal["kafka-python", "confluent"] = Field(
        "kafka-python",
        description="the consumer's Kafka client: kafka-python (pure Python, always installed) or confluent "
        "(confluent-kafka on librdkafka: the same contract, about a fifth of the CPU per record consumed; "
        "pip install 'agent-tool-monitor[confluent]')",
    )
    encoding: Literal["auto", "otlp_proto", "otlp_json"] = Field(
        "auto", description="record encoding; auto detects JSON by a leading '{'"
    )
    dead_letter_suffix: str = Field(".dlq", min_length=1, description="dead-letter topic = <topic><suffix>")
    session_timeout_ms: int = Field(10_000, ge=1_000, description="consumer group session timeout in ms")
    heartbeat_interval_ms: int = Field(1_000, ge=100, description="heartbeat interval in ms (< session timeout)")
    max_poll_records: int = Field(500, ge=1, description="records per poll")
    commit_interval_s: float = Field(5.0, gt=0, description="seconds between offset commits")
    auto_offset_reset: Literal["earliest", "latest"] = Field("earliest", description="where a new group starts reading")
    startup_timeout_s: float = Field(
        10.0, gt=0, description="at startup, give up reaching the brokers after this many seconds (exit 4)"
    )
    tls: KafkaTlsSettings = Field(
        default_factory=KafkaTlsSettings,  # type: ignore[arg-type]
        description="TLS to the brokers (security_protocol SSL or SASL_SSL): CA, client certificate, hostname check",
    )
    sasl: KafkaSaslSettings = Field(
        default_factory=KafkaSaslSettings,  # type: ignore[arg-type]
        description="SASL authentication (security_protocol SASL_SSL or SASL_PLAINTEXT): mechanism and credentials",
    )
    # declared after tls and sasl so that its check sees them (and names this key in the error)
    security_protocol: KafkaSecurityProtocol = Field(
        "PLAINTEXT",
        validate_default=True,
        description="how the brokers are reached: PLAINTEXT, SSL (TLS), SASL_SSL (SASL over TLS) or SASL_PLAINTEXT",
    )

    @field_validator("bootstrap_servers")
    @classmethod
    def _host_port_list(cls, value: str) -> str:
        for entry in value.split(","):
            problem = _host_port_problem(entry.strip())
            if problem:
                raise ValueError(f"{entry.strip()!r} {problem}; write host:port[,host:port…]")
        return value

    @field_validator("client")
    @classmethod
    def _client_installed(cls, value: str) -> str:
        """``confluent`` needs the optional ``confluent-kafka`` package: refused here, not when the consumer starts."""
        if value == "confluent":
            import importlib.util

            if importlib.util.find_spec("confluent_kafka") is None:
                raise ValueError(
                    "the confluent-kafka package is not installed: pip install 'agent-tool-monitor[confluent]', "
                    "or set kafka.client to kafka-python"
                )
        return value

    @field_validator("security_protocol")
    @classmethod
    def _protocol_matches_sections(cls, value: str, info: ValidationInfo) -> str:
        tls, sasl = info.data.get("tls"), info.data.get("sasl")
        if isinstance(tls, KafkaTlsSettings) and value in ("PLAINTEXT", "SASL_PLAINTEXT") and tls.configured():
            raise ValueError(
                f"kafka.tls.{tls.configured()[0]} is set but {value} does not use TLS: set SSL or SASL_SSL, "
                "or remove kafka.tls"
            )
        if isinstance(sasl, KafkaSaslSettings):
            if value.startswith("SASL_") and sasl.mechanism is None:
                raise ValueError(
                    f"{value} needs kafka.sasl.mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER) and "
                    "its credentials"
                )
            if not value.startswith("SASL_") and sasl.mechanism is not None:
                raise ValueError(
                    f"kafka.sasl.mechanism is {sasl.mechanism} but {value} does not authenticate with SASL: set "
                    "SASL_SSL (or SASL_PLAINTEXT), or remove kafka.sasl"
                )
        return value

    @model_validator(mode="after")
    def _heartbeat_below_session(self) -> KafkaSettings:
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError(
                "heartbeat_interval_ms must be lower than session_timeout_ms (Kafka recommends at most a third of it)"
            )
        return self


class AssemblerSettings(_Section):
    root_idle_s: float = Field(
        5.0, ge=0, description="close a trace this long after its last span once its root arrived"
    )
    idle_s: float = Field(30.0, ge=0, description="close a trace with no root span after this idle time")
    max_age_s: float = Field(600.0, gt=0, description="force-close a trace open this long")
    max_spans: int = Field(10_000, ge=1, description="force-close a trace holding this many spans")
    max_open_spans: int = Field(1_000_000, ge=1, description="memory bound: spans buffered across open traces")
    max_open_bytes: int = Field(
        256 * 1024 * 1024,
        ge=1024 * 1024,
        description="memory bound in bytes: encoded record bytes buffered across open traces (oldest forced out)",
    )
    late_window_s: float = Field(
        600.0, ge=0, description="how long closed trace ids are remembered to count late spans"
    )


class DecodeSettings(_Section):
    max_record_bytes: int = Field(64 * 1024 * 1024, ge=1024, description="records larger than this are dead-lettered")
    max_attribute_chars: int = Field(
        1024 * 1024, ge=256, description="string attribute values are cut to this many characters"
    )
    lazy: bool = Field(
        True,
        description="keep protobuf records undecoded while their traces are open, and decode a trace's spans only "
        "when it closes and is sampled (a twentieth of the memory per open span; bench/pipeline.py measures the CPU)",
    )


class WorkersSettings(_Section):
    """Rebuild → sample → score in a pool of worker processes, so one daemon uses the CPUs of its pod."""

    processes: int = Field(
        0,
        ge=0,
        le=64,
        description="worker processes that rebuild, sample and score closed traces; 0 does it in the daemon's "
        "own process (one CPU). Give the pod this many CPUs plus one",
    )
    batch_traces: int = Field(32, ge=1, le=4096, description="closed traces sent to a worker at once")
    linger_s: float = Field(
        0.05, ge=0, le=5, description="seconds a batch that is not full waits for more traces before it is sent"
    )
    max_batches: int = Field(
        4, ge=1, le=64, description="batches in flight per worker; past it the daemon pauses fetching (backpressure)"
    )
    start_timeout_s: float = Field(60.0, gt=0, description="seconds the workers may take to start")


class RebuildSettings(_Section):
    max_depth: int = Field(
        256, ge=2, description="deepest parent-to-child span chain rebuilt; deeper traces are rejected (too_deep)"
    )
    max_agent_depth: int = Field(
        32, ge=1, description="deepest nesting of agent runs rebuilt; deeper traces are rejected (too_deep)"
    )


class DeadLetterSettings(_Section):
    enabled: bool = Field(True, description="send undecodable records to <topic><dead_letter_suffix>")
    max_request_bytes: int | None = Field(
        None,
        ge=1024,
        description="largest dead letter sent whole (default: the broker's limit, else 1 MiB); larger → a stub",
    )
    max_rate: float = Field(
        0.5, gt=0, le=1, description="stop the daemon when this fraction of records in the window is dead-lettered"
    )
    window: int = Field(1000, ge=10, description="records in the dead-letter rate window")


class HttpSettings(_Section):
    host: str = Field("0.0.0.0", description="address of the /metrics, /healthz and /readyz server")
    port: int = Field(9464, ge=0, le=65535, description="port of the HTTP server (0 = any free port)")
    ready_max_lag: int = Field(100_000, ge=0, description="/readyz fails when consumer lag exceeds this many records")
    ready_max_store_outage_s: float = Field(
        30.0, ge=0, description="/readyz fails once the store has been unavailable longer than this many seconds"
    )
    request_timeout_s: float = Field(10.0, gt=0, description="an HTTP connection idle or slow this long is closed")
    max_connections: int = Field(32, ge=1, description="concurrent HTTP connections; more wait in the listen backlog")


class RunSummarySettings(_Section):
    """What the store keeps of each scored run so that it can be looked at (``monitor show``, the weekly report)."""

    enabled: bool = Field(True, description="keep each scored run's trajectory (user text, answer, calls)")
    max_field_chars: int = Field(
        2000, ge=50, le=1_000_000, description="every text and value in a kept run is cut to this many characters"
    )
    max_calls: int = Field(200, ge=1, description="calls kept per run (the first ones; the count says how many)")
    redact_keys: str = Field(
        r"(?i)(pass(word|wd)?|secret|token|api[-_]?key|authori[sz]ation|cookie|credential|private[-_]?key|ssn)",
        description="argument and result keys matching this regex have their values replaced by [redacted]",
    )
    redact_hook: str | None = Field(
        None,
        description="module:function called with each kept run (a dict) that returns it redacted, after redact_keys",
    )

    @field_validator("redact_keys")
    @classmethod
    def _regex(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from exc
        return value

    @field_validator("redact_hook")
    @classmethod
    def _hook(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", value):
            raise ValueError("write it as package.module:function")
        return value


class StoreSettings(_Section):
    url: str = Field(
        "sqlite:///monitor.db", description="SQLAlchemy URL: sqlite:///file.db or postgresql+psycopg://user@host/db"
    )
    retention_days: float = Field(30.0, gt=0, description="results older than this are deleted")
    retention_interval_s: float = Field(3600.0, gt=0, description="seconds between retention sweeps")
    migrate_on_start: bool = Field(True, description="apply pending migrations at startup")
    connect_timeout_s: float = Field(5.0, gt=0, description="give up connecting to the database after this long")
    statement_timeout_s: float = Field(
        30.0, gt=0, description="a store transaction taking longer is abandoned: the store counts as unavailable"
    )
    summaries: RunSummarySettings = Field(
        default_factory=RunSummarySettings,  # type: ignore[arg-type]
        description="the runs kept to be looked at",
    )


Rate = Annotated[float, Field(ge=0, le=1)]
"""A sampling rate: the fraction of runs (or of a scorer's runs) scored."""


class SamplingSettings(_Section):
    rate: float = Field(1.0, ge=0, le=1, description="fraction of runs scored (deterministic on the trace id)")
    per_agent: dict[str, Rate] = Field(
        default_factory=dict, description="a rate in [0, 1] per agent name (overrides rate)"
    )
    per_scorer: dict[str, Rate] = Field(
        default_factory=dict, description="a rate in [0, 1] per scorer id (applied on top)"
    )
    always_if_errored: bool = Field(True, description="always score runs whose root span or a tool call errored")
    always_if_flagged: bool = Field(
        True, description="always run sampled-out scorers when a code check flagged the run"
    )
    always_attributes: dict[str, str] = Field(
        default_factory=dict, description="always score runs whose root/resource attribute has this value"
    )
    salt: str = Field("", description="changes which runs a rate selects, identically on every replica")


class TracingSettings(_Section):
    """Links from the monitor's output (reports, ``monitor runs``) to the tracing UI the spans also go to."""

    url_template: str | None = Field(
        None,
        description="a trace's URL in your tracing UI, with {trace_id} (and optionally {run_id}), e.g. "
        "https://jaeger.example/trace/{trace_id}",
    )

    @field_validator("url_template")
    @classmethod
    def _template(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if "{trace_id}" not in value:
            raise ValueError("the template must contain {trace_id}")
        try:
            value.format(trace_id="0" * 32, run_id="0" * 16)
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"only {{trace_id}} and {{run_id}} may be used: {exc}") from exc
        return value

    def link(self, trace_id: str, run_id: str | None = None) -> str | None:
        """The trace's URL, or None without a template."""
        if self.url_template is None:
            return None
        return self.url_template.format(trace_id=trace_id, run_id=run_id or "")


class ReportSettings(_Section):
    """The weekly failure-analysis report (``monitor report``) and the failure patterns."""

    title: str = Field("Agent tool-use report", min_length=1, description="the report's title")
    max_recommendations: int = Field(10, ge=1, le=200, description="recommendations listed, most impact first")
    examples: int = Field(3, ge=0, le=50, description="example trace ids per pattern and recommendation")
    min_runs: int = Field(5, ge=1, description="a pattern needs this many runs hurt to be reported")
    significance: float = Field(
        0.05, gt=0, lt=0.5, description="a week-over-week change counts when its two-sided p-value is below this"
    )
    webhook_url_env: str = Field(
        "MONITOR_REPORT_WEBHOOK_URL",
        description="name of the environment variable holding the Slack-compatible webhook URL (a secret)",
    )
    patterns_refresh_s: float = Field(
        300.0, gt=0, description="the daemon recomputes the active failure patterns (a metric) this often"
    )
    patterns_window_s: float = Field(86_400.0, gt=0, description="the window of the active failure patterns")
    max_active_patterns: int = Field(50, ge=1, le=1000, description="active failure patterns exported at most")

    @field_validator("webhook_url_env")
    @classmethod
    def _env_name(cls, value: str) -> str:
        if not _ENV_NAME.fullmatch(value):
            raise ValueError("not an environment variable name (letters, digits and '_'); give its name, not the URL")
        return value

    def webhook_url(self) -> SecretStr | None:
        """The webhook URL from the environment (never a setting: it carries a token), or None."""
        text = os.environ.get(self.webhook_url_env, "").strip()
        return SecretStr(text) if text else None


class MetricsSettings(_Section):
    known_agents: list[str] = Field(default_factory=list, description="agent names always kept as label values")
    known_tools: list[str] = Field(default_factory=list, description="tool names always kept as label values")
    top_n: int = Field(50, ge=0, description="besides the known ones, this many most frequent names keep a label")


class ScoringSettings(_Section):
    checks: list[str] = Field(
        default_factory=lambda: [
            "schema_check",
            "unknown_tool_check",
            "tool_error_check",
            "repetition_check",
            "call_budget_check",
            "latency_check",
            "no_tool_needed_check",
            "forbidden_tool_check",
        ],
        description="reference-free checks run on every sampled run (kinds `monitor scorers` lists; "
        "monitor config and monitor run check them against the scorer registry)",
    )
    score_children: bool = Field(True, description="score nested agent runs as runs of their own")


class EvaluationEventsSettings(_Section):
    enabled: bool = Field(False, description="send each new result as an OTLP gen_ai.evaluation.result event")
    protocol: Literal["grpc", "http/protobuf"] = Field("http/protobuf", description="OTLP transport")
    endpoint: str | None = Field(
        None,
        description="OTLP receiver URL (http:// or https://); default http://localhost:4318 (http/protobuf, "
        "/v1/logs appended when the URL has no path) or http://localhost:4317 (grpc)",
    )
    headers: dict[
        str, Annotated[SecretStr, PlainSerializer(lambda v: MASK if v.get_secret_value() else "", when_used="json")]
    ] = Field(default_factory=dict, description="headers sent with each export (values are secrets: shown as ***)")
    timeout_s: float = Field(10.0, gt=0, le=300, description="an export request (with retries) gives up after this")
    max_queue: int = Field(2048, ge=1, description="events waiting for export; beyond this new events are dropped")
    batch_size: int = Field(512, ge=1, description="events per export request (at most max_queue)")

    @field_validator("endpoint")
    @classmethod
    def _endpoint_url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"https?://[^/\s]+", value):
            raise ValueError(f"{value!r} is not an http:// or https:// URL; write e.g. http://collector:4318")
        return value

    @model_validator(mode="after")
    def _batch_within_queue(self) -> EvaluationEventsSettings:
        if self.batch_size > self.max_queue:
            raise ValueError("batch_size must not exceed max_queue")
        return self


class ShutdownSettings(_Section):
    drain_deadline_s: float = Field(30.0, gt=0, description="on SIGTERM: finish, score and commit within this time")


# --------------------------------------------------------------------------- LLM judges (SCORING.md §4)


class ModelPrice(_Section):
    """One model's row of the ``judge.prices`` table (USD per million tokens, SCORING.md §4.0)."""

    input_per_mtok: float = Field(..., ge=0, description="USD per million uncached input tokens")
    output_per_mtok: float = Field(..., ge=0, description="USD per million output tokens")
    cache_read_per_mtok: float | None = Field(
        None,
        ge=0,
        description="USD per million cache-hit tokens when Anthropic publishes a rate other than 0.1 × input "
        "(default: 0.1 × input_per_mtok, SCORING.md §4.0)",
    )
    min_cacheable_tokens: int | None = Field(
        None,
        ge=0,
        description="shortest prefix the model caches (a shorter cache_control prefix is billed as plain input; "
        "informational; unknown when null)",
    )
    long_prompt_tokens: int | None = Field(
        None,
        ge=1,
        description="a request whose prompt (input + cache writes + cache reads) exceeds this many tokens pays "
        "long_prompt_multiplier × every rate (Claude Haiku 5.5: 100000)",
    )
    long_prompt_multiplier: float = Field(
        1.0, ge=1, description="factor on every rate of a request above long_prompt_tokens"
    )

    @model_validator(mode="after")
    def _multiplier_needs_threshold(self) -> ModelPrice:
        if self.long_prompt_multiplier != 1.0 and self.long_prompt_tokens is None:
            raise ValueError("long_prompt_multiplier needs long_prompt_tokens (the prompt size it applies above)")
        return self


JUDGE_PRICES_VERSION: Final = "anthropic-2026-11-24"
"""Version of :data:`DEFAULT_JUDGE_PRICES`; a result's cost is reproducible from (usage, model, version)."""

# Anthropic's published list prices in USD per million tokens, first-party Claude API, as of 2026-11-24:
#   https://platform.claude.com/docs/en/about-claude/pricing ("Model pricing") and each model's page
#   https://platform.claude.com/docs/en/models/<model>/overview (e.g. …/models/haiku-5-5/overview).
# Cache writes cost 1.25 × input (5m TTL) or 2 × input (1h TTL) on every model listed; cache hits 0.1 × input
# unless cache_read_per_mtok says otherwise (Fable 5.1: $0.25 = 0.025 ×; Opus 5.5: $0.20 = 0.05 ×; Sonnet 5.5:
# $0.10 = 0.05 × since the cut of 2026-10-07). Haiku 5.5 has two bands: prompts up to 100K tokens pay the rates
# below, longer prompts 5 × every rate ($0.50 / $2.50). The stored copy of the pricing page predates the
# Sonnet 5.5 cut and Haiku 5.5; those two rows follow the release notes that quote it
# (https://github.com/kurofune/claudit/releases/tag/v1.9.2, checked against the Haiku 5.5 overview page).
# Batch requests are billed at 50 %. Regional (inference_geo) and fast-mode surcharges are not modelled.
# min_cacheable_tokens: https://platform.claude.com/docs/en/build-with-claude/prompt-caching ("Cache
# limitations"; quoted in https://github.com/anthropics/anthropic-sdk-python/issues/1194); left unknown (null)
# for the 5.x models, whose minimums the sources we could check disagree on.
# Retired models (Opus 4 / 4.1, Sonnet 4, Haiku 3.x) are left out; add rows (and change prices_version) to use them.
_PRICE_ROWS: Final[dict[str, dict[str, Any]]] = {
    "claude-fable-5-1": {"input_per_mtok": 10.0, "output_per_mtok": 50.0, "cache_read_per_mtok": 0.25},
    "claude-fable-5": {"input_per_mtok": 10.0, "output_per_mtok": 50.0},
    "claude-opus-5-5": {"input_per_mtok": 4.0, "output_per_mtok": 20.0, "cache_read_per_mtok": 0.20},
    "claude-opus-5": {"input_per_mtok": 5.0, "output_per_mtok": 25.0},
    "claude-opus-4-8": {"input_per_mtok": 5.0, "output_per_mtok": 25.0, "min_cacheable_tokens": 1024},
    "claude-opus-4-7": {"input_per_mtok": 5.0, "output_per_mtok": 25.0, "min_cacheable_tokens": 4096},
    "claude-opus-4-6": {"input_per_mtok": 5.0, "output_per_mtok": 25.0, "min_cacheable_tokens": 4096},
    "claude-opus-4-5": {"input_per_mtok": 5.0, "output_per_mtok": 25.0, "min_cacheable_tokens": 4096},
    "claude-sonnet-5-5": {"input_per_mtok": 2.0, "output_per_mtok": 10.0, "cache_read_per_mtok": 0.10},
    "claude-sonnet-5": {"input_per_mtok": 2.0, "output_per_mtok": 10.0},
    "claude-sonnet-4-6": {"input_per_mtok": 3.0, "output_per_mtok": 15.0, "min_cacheable_tokens": 1024},
    "claude-sonnet-4-5": {"input_per_mtok": 3.0, "output_per_mtok": 15.0, "min_cacheable_tokens": 1024},
    "claude-haiku-5-5": {
        "input_per_mtok": 0.10,
        "output_per_mtok": 0.50,
        "long_prompt_tokens": 100_000,
        "long_prompt_multiplier": 5.0,
    },
    "claude-haiku-4-5": {"input_per_mtok": 1.0, "output_per_mtok": 5.0, "min_cacheable_tokens": 4096},
}

DEFAULT_JUDGE_PRICES: Final[dict[str, ModelPrice]] = {model: ModelPrice(**row) for model, row in _PRICE_ROWS.items()}
"""The built-in ``judge.prices`` table (version :data:`JUDGE_PRICES_VERSION`)."""


class JudgeBudgetLimits(_Section):
    """Limits of one budget scope (all judges together, or one judge kind); null = unlimited."""

    requests_per_minute: int | None = Field(
        None, ge=1, description="judge calls admitted in any 60 s window (retries count when recorded)"
    )
    input_tokens_per_day: int | None = Field(
        None, ge=0, description="input tokens (plain + cache writes + cache reads) per UTC day"
    )
    output_tokens_per_day: int | None = Field(None, ge=0, description="output tokens per UTC day")
    usd_per_day: float | None = Field(None, ge=0, description="USD per UTC day, priced with judge.prices")


class JudgeBudgets(_Section):
    total: JudgeBudgetLimits = Field(
        default_factory=JudgeBudgetLimits,  # type: ignore[arg-type]
        description="limits on all judges together",
    )
    per_judge: dict[str, JudgeBudgetLimits] = Field(
        default_factory=dict, description="limits per judge kind (`monitor scorers` lists the judge_* kinds)"
    )


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_USERINFO = re.compile(r"^(?P<scheme>https?://)[^/@\s]*@")


class JudgeSettings(_Section):
    """LLM judges on Anthropic's API (SCORING.md §4; budgets DESIGN.md §3).

    The API key is never a setting: it is read from the environment variable ``api_key_env`` or the file
    ``api_key_file`` (a mounted Kubernetes Secret) by :meth:`api_key`, which returns a
    :class:`~pydantic.SecretStr` (``repr`` shows ``**********``).
    """

    enabled: bool = Field(False, description="run the judge_* scorers the rules and checks name (else judges_disabled)")
    model: str = Field("claude-sonnet-4-6", min_length=1, description="the judges' model")
    models: dict[str, Annotated[str, Field(min_length=1)]] = Field(
        default_factory=dict, description="model per judge kind, overriding model ({judge_goal_accuracy: …})"
    )
    max_tokens: int = Field(1024, ge=16, le=128_000, description="max_tokens of a judge request (doubled on retry)")
    cache_ttl: Literal["5m", "1h"] = Field(
        "5m", description="prompt-cache TTL of the static blocks (1h for low-traffic agents)"
    )
    max_field_chars: int = Field(
        2000, ge=100, description="tool results and long texts are cut to this many characters"
    )
    max_input_tokens: int = Field(
        30_000, ge=1000, description="middle calls are elided above this estimate (3.5 characters a token)"
    )
    batch: bool = Field(False, description="send judge requests through the Message Batches API (half price)")
    strict_tools: bool = Field(
        False, description="send the verdict tool with strict: true (for models that support strict tool use)"
    )
    api_key_env: str = Field(
        "ANTHROPIC_API_KEY", description="name of the environment variable holding the API key (not the key)"
    )
    api_key_file: Path | None = Field(
        None, description="file holding the API key, e.g. a mounted Kubernetes Secret (read before api_key_env)"
    )
    base_url: str | None = Field(None, description="Anthropic API base URL (a proxy, a test server); default the SDK's")
    timeout_s: float = Field(60.0, gt=0, le=3600, description="an API request gives up after this many seconds")
    max_retries: int = Field(4, ge=0, le=10, description="API retries with backoff (429, 5xx, connection errors)")
    concurrency: int = Field(4, ge=1, le=256, description="judge requests in flight at once")
    max_backlog: int = Field(
        1000, ge=1, description="runs waiting for a judge; beyond this new runs are dropped and counted"
    )
    only_flagged: bool = Field(False, description="judge only runs that a code check flagged")
    max_wait_s: float = Field(
        21_600.0,
        gt=0,
        description="a run waiting this long for its verdict (the API down, the budget spent) is dropped and counted",
    )
    lease_s: float = Field(
        600.0,
        ge=10,
        description="a daemon that stops renewing its claim on a waiting verdict for this long gives it to another",
    )
    owner: str | None = Field(
        None,
        min_length=1,
        description="this daemon's name on the verdicts it owes (default the host name: a restarted pod resumes "
        "its own at once)",
    )
    batch_max_requests: int = Field(
        1000, ge=1, le=100_000, description="with batch: requests per Message Batch at most"
    )
    batch_max_wait_s: float = Field(
        60.0, gt=0, description="with batch: a request waits at most this long before its batch is sent"
    )
    batch_poll_s: float = Field(30.0, gt=0, description="with batch: seconds between polls of a batch in flight")
    calibration_floor: float = Field(
        0.6,
        ge=-1,
        le=1,
        description="Cohen's kappa below which `monitor judge calibrate` flags a judge",
    )
    rejudge_borderline: float | None = Field(
        None,
        gt=0,
        le=0.5,
        description="judge again a score within this margin of its threshold (null: never)",
    )
    prices: dict[str, ModelPrice] = Field(
        default_factory=lambda: dict(DEFAULT_JUDGE_PRICES),
        description="USD per million tokens per model; entries given are merged over the built-in table",
    )
    prices_version: str = Field(
        JUDGE_PRICES_VERSION,
        min_length=1,
        validate_default=True,  # the check below compares it with the prices given
        description="a name of your own for the prices table once it differs from the built-in one "
        "(recorded with each cost)",
    )
    budgets: JudgeBudgets = Field(
        default_factory=JudgeBudgets,
        description="requests per minute, tokens and USD per day, for all judges and per judge kind",
    )

    @field_validator("api_key_env")
    @classmethod
    def _env_var_name(cls, value: str) -> str:
        if not _ENV_NAME.fullmatch(value):
            raise ValueError(
                "not an environment variable name (letters, digits and '_'); give the variable's name, never the key"
            )
        return value

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"https?://[^/\s]+", value):
            raise ValueError(f"{value!r} is not an http:// or https:// URL; write e.g. https://llm-proxy:8080")
        return value

    @field_serializer("base_url", when_used="json")
    def _hide_userinfo(self, value: str | None) -> str | None:
        """``https://TOKEN@proxy`` → ``https://***@proxy`` in dumps (``monitor config``): a proxy's user part
        may be a token, which :func:`mask_url` (made for database URLs, whose user is not secret) leaves."""
        return None if value is None else _USERINFO.sub(rf"\g<scheme>{MASK}@", value, count=1)

    @field_validator("prices", mode="before")
    @classmethod
    def _merge_prices(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {**DEFAULT_JUDGE_PRICES, **value}
        return value

    @field_validator("prices_version")
    @classmethod
    def _versioned_prices(cls, value: str, info: ValidationInfo) -> str:
        prices = info.data.get("prices")  # absent when prices itself was rejected
        if prices is not None and prices != DEFAULT_JUDGE_PRICES and value == JUDGE_PRICES_VERSION:
            raise ValueError(
                f"judge.prices differs from the built-in table {JUDGE_PRICES_VERSION!r}, so costs computed with it "
                "would pass for list prices"
            )
        return value

    def model_for(self, kind: str) -> str:
        """The model judge ``kind`` uses: ``models[kind]``, else ``model``."""
        return self.models.get(kind, self.model)

    def api_key(self) -> SecretStr | None:
        """The API key: the stripped content of ``api_key_file`` when set, else of the environment variable
        ``api_key_env``; None when that is unset or empty. Raises :class:`OSError` when ``api_key_file``
        cannot be read. The key is returned as a :class:`~pydantic.SecretStr`, never logged."""
        if self.api_key_file is not None:
            text = Path(self.api_key_file).read_text(encoding="utf-8").strip()
        else:
            text = os.environ.get(self.api_key_env, "").strip()
        return SecretStr(text) if text else None


class Settings(BaseSettings):
    """The monitor's configuration (see the module docstring for sources and precedence)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
    )

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)  # type: ignore[arg-type]
    assembler: AssemblerSettings = Field(default_factory=AssemblerSettings)  # type: ignore[arg-type]
    decode: DecodeSettings = Field(default_factory=DecodeSettings)  # type: ignore[arg-type]
    rebuild: RebuildSettings = Field(default_factory=RebuildSettings)  # type: ignore[arg-type]
    workers: WorkersSettings = Field(default_factory=WorkersSettings)  # type: ignore[arg-type]
    dead_letter: DeadLetterSettings = Field(default_factory=DeadLetterSettings)  # type: ignore[arg-type]
    http: HttpSettings = Field(default_factory=HttpSettings)  # type: ignore[arg-type]
    store: StoreSettings = Field(default_factory=StoreSettings)  # type: ignore[arg-type]
    sampling: SamplingSettings = Field(default_factory=SamplingSettings)  # type: ignore[arg-type]
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)  # type: ignore[arg-type]
    scoring: ScoringSettings = Field(default_factory=ScoringSettings)  # type: ignore[arg-type]
    shutdown: ShutdownSettings = Field(default_factory=ShutdownSettings)  # type: ignore[arg-type]
    evaluation_events: EvaluationEventsSettings = Field(default_factory=EvaluationEventsSettings)  # type: ignore[arg-type]
    judge: JudgeSettings = Field(default_factory=JudgeSettings)  # type: ignore[arg-type]
    tracing: TracingSettings = Field(default_factory=TracingSettings)  # type: ignore[arg-type]
    report: ReportSettings = Field(default_factory=ReportSettings)  # type: ignore[arg-type]
    rules_file: Path | None = Field(None, description="YAML file of per-agent rules (SCORING.md §3.9)")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="log level")
    log_format: Literal["text", "json"] = Field(
        "text", description="text lines, or one JSON object per line (time, level, logger, message) for log pipelines"
    )
    log_client_debug: bool = Field(
        False,
        description="let client libraries (kafka-python, SQLAlchemy, HTTP clients) log below INFO/WARNING; "
        "their DEBUG output holds raw records: user messages and tool arguments",
    )

    _source: str = PrivateAttr("arguments")

    @property
    def source(self) -> str:
        """Where these settings were read from, for messages: the YAML file, ``environment`` or ``arguments``."""
        return self._source

    def masked_dump(self) -> dict[str, Any]:
        """Every setting as JSON-compatible data (``model_dump(mode="json")``) with secrets masked."""
        masked: dict[str, Any] = _mask_tree(self.model_dump(mode="json"))
        return masked

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        yaml_file = _CURRENT_YAML.get("path")
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if yaml_file is not None:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=yaml_file))
        return tuple(sources)


_CURRENT_YAML: dict[str, Path | None] = {"path": None}


class SettingsError(ValueError):
    """A configuration that cannot be used; ``problems`` lists one line per problem.

    Each line reads ``<name> = <value>: <problem>. Fix: <fix>`` (see :func:`format_problem`);
    ``source`` names where the settings came from (a file, ``environment``…). ``str()`` is the
    report printed by ``monitor config`` and ``monitor run``: a header line, then ``  - <line>`` each.

    When :func:`load_settings` rejects some values, ``partial`` holds the settings with each top-level
    key that had a bad value (``invalid_keys``) put back to its default, so that the other keys can
    still be checked (:func:`monitor.preflight.with_configuration_checks`); None when even that fails.
    """

    def __init__(
        self,
        problems: list[str],
        source: str,
        *,
        partial: Settings | None = None,
        invalid_keys: frozenset[str] = frozenset(),
    ) -> None:
        self.problems = [mask_secrets(p) for p in problems]
        self.source = source
        self.partial = partial
        self.invalid_keys = invalid_keys
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid configuration ({source}):\n{lines}")


# --------------------------------------------------------------------------- secrets

_SECRET_WORDS = re.compile(r"password|passwd|secret|token|credential|api[_\-]?key$", re.IGNORECASE)
_SECRET_NAMES = frozenset({"pwd", "pass", "key", "apikey", "api_key", "api-key", "private_key", "sslkey"})
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@]*):(?P<secret>[^\s@]*)@")
_NAME_VALUE = re.compile(r"(?P<head>(?<![\w.\-])(?P<name>[A-Za-z_][\w.\-]*)=)(?P<value>[^\s&#;,'\")]+)")
_ANTHROPIC_KEY = re.compile(r"(?<![\w\-])sk-ant-[\w\-]+")
MASK = "***"


def is_secret_name(name: str) -> bool:
    """True for parameter names whose values are secrets: any name containing ``password``,
    ``passwd``, ``secret``, ``token`` or ``credential`` or ending in ``api_key`` / ``apikey``
    (``ANTHROPIC_API_KEY``), and ``key``, ``pwd``… exactly."""
    return bool(_SECRET_WORDS.search(name)) or name.lower() in _SECRET_NAMES


def mask_secrets(text: str) -> str:
    """``text`` with every secret replaced by ``***``: the password of each ``scheme://user:password@``
    URL, the value of each ``name=value`` pair (URL query or DSN) whose name :func:`is_secret_name`, and
    anything shaped like an Anthropic API key (``sk-ant-…`` → ``sk-ant-***``).

    Errs on the side of masking: a ``scheme://a:b@`` that was not a password is masked too.
    """
    masked = _ANTHROPIC_KEY.sub(f"sk-ant-{MASK}", text)
    masked = _URL_PASSWORD.sub(lambda m: f"{m['head']}:{MASK}@" if m["secret"] != MASK else m[0], masked)

    def _value(m: re.Match[str]) -> str:
        return f"{m['head']}{MASK}" if is_secret_name(m["name"]) else m[0]

    return _NAME_VALUE.sub(_value, masked)


def mask_url(url: str) -> str:
    """A URL fit to print: parsed with SQLAlchemy (which knows where a password ends) and rendered
    with the password hidden, then :func:`mask_secrets` for secret query parameters. A string that
    is not a URL is only passed through :func:`mask_secrets`."""
    if "://" not in url:
        return mask_secrets(url)
    scheme, _, rest = url.partition("://")
    base, question, query = rest.partition("?")
    credentials, at, host = base.rpartition("@")
    if at and ":" in credentials:  # a raw '@' in a password: mask up to the last '@', never less
        url = f"{scheme}://{credentials.split(':', 1)[0]}:{MASK}@{host}{question}{query}"
    try:
        from sqlalchemy.engine import make_url

        rendered = make_url(url).render_as_string(hide_password=True)
    except Exception:
        rendered = url
    return mask_secrets(rendered.replace("%2A%2A%2A", MASK))  # a user already masked (***), not re-encoded


def _is_token_count(name: str, value: Any) -> bool:
    """``max_tokens: 1024``, ``input_tokens_per_day: 5e6``: a number under a key about ``tokens`` counts
    LLM tokens; it is not an access token."""
    return isinstance(value, int | float) and not isinstance(value, bool) and "tokens" in name.lower()


def _mask_tree(value: Any) -> Any:
    if isinstance(value, str):
        return mask_url(value)
    if isinstance(value, dict):
        return {
            k: MASK if is_secret_name(str(k)) and v and not _is_token_count(str(k), v) else _mask_tree(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_mask_tree(v) for v in value]
    return value


# --------------------------------------------------------------------------- naming a setting


def env_var_name(loc: tuple[str | int, ...] | list[str | int]) -> str:
    """The environment variable of a setting: ``("sampling", "rate")`` → ``MONITOR_SAMPLING__RATE``."""
    return ENV_PREFIX + "__".join(str(part).upper() for part in loc)


def env_source(loc: tuple[str | int, ...] | list[str | int]) -> str | None:
    """The ``MONITOR_*`` variable (as spelled in the environment) that supplies the setting at ``loc``,
    or None when the value comes from elsewhere.

    pydantic-settings does not say which source a value came from, so this looks at ``os.environ``
    (names compared case-insensitively, as pydantic-settings does): the variable of the key itself,
    else the variable of an enclosing section whose JSON value contains the key.
    """
    present = {name.upper(): name for name in os.environ if name.upper().startswith(ENV_PREFIX)}
    for depth in range(len(loc), 0, -1):
        name = present.get(env_var_name(loc[:depth]))
        if name is None:
            continue
        if depth == len(loc):
            return name
        try:
            doc: Any = json.loads(os.environ[name])
        except ValueError:
            continue
        for part in loc[depth:]:
            if isinstance(doc, dict) and str(part) in doc:
                doc = doc[str(part)]
            elif isinstance(doc, list) and isinstance(part, int) and 0 <= part < len(doc):
                doc = doc[part]
            else:
                break
        else:
            return name
    return None


def setting_label(loc: tuple[str | int, ...] | list[str | int]) -> str:
    """How a problem names the setting: the environment variable that set it (followed by the key in
    parentheses when the variable holds the JSON of an enclosing section), else the dotted file key."""
    key = ".".join(str(part) for part in loc) or "<root>"
    name = env_source(loc)
    if name is None:
        return key
    return name if name.upper() == env_var_name(loc) else f"{name} ({key})"


def show_value(value: Any) -> str:
    """A value as an error message quotes it: ``repr`` with secrets masked; mappings as ``{…}``."""
    if isinstance(value, dict):
        return "{…}"
    if isinstance(value, str):
        return repr(mask_url(value))
    if isinstance(value, Path):
        return repr(str(value))
    return mask_secrets(repr(value))


def format_problem(loc: tuple[str | int, ...] | list[str | int], value: Any, problem: str, fix: str) -> str:
    """One :class:`SettingsError` line: ``<name> = <value>: <problem>. Fix: <fix>``, where ``<name>`` is
    :func:`setting_label` and ``<value>`` :func:`show_value`."""
    return f"{setting_label(loc)} = {show_value(value)}: {problem.rstrip('.')}. Fix: {fix}"


def _host_port_problem(entry: str) -> str | None:
    """Why ``entry`` is not ``host``, ``host:port`` or ``[v6]:port`` (None when it is)."""
    if not entry:
        return "is empty"
    host, port = entry, None
    if entry.startswith("["):
        close = entry.find("]")
        if close < 0:
            return "has an unclosed '['"
        host, rest = entry[1:close], entry[close + 1 :]
        if rest:
            if not rest.startswith(":"):
                return "has text after ']' that is not ':port'"
            port = rest[1:]
    elif entry.count(":") == 1:
        host, port = entry.split(":")
    if not host or any(c.isspace() or c in "/@" for c in host):
        return "has no valid host"
    if port is not None and (not port.isdigit() or not 0 < int(port) < 65536):
        return f"has port {port!r}, not a number from 1 to 65535"
    return None


def _describe(loc: tuple[Any, ...]) -> tuple[str, str | None, list[str]]:
    """Dotted key, the field's description and the valid sibling keys, walking the settings models."""
    key = ".".join(str(p) for p in loc)
    model: Any = Settings
    description = None
    siblings: list[str] = list(Settings.model_fields)
    for part in loc:
        if get_origin(model) is dict:  # a key of a mapping setting (per_judge.<kind>): walk into its values
            model = get_args(model)[1]
            continue
        fields = getattr(model, "model_fields", None)
        if not fields:
            break
        siblings = list(fields)
        if part not in fields:
            break
        info = fields[part]
        description = info.description
        model = info.annotation
    return key, description, siblings


def _fix_hint(
    loc: tuple[Any, ...], error_type: str, description: str | None, ctx: dict[str, Any] | None, siblings: list[str]
) -> str:
    key = ".".join(str(p) for p in loc)
    from_env = env_source(loc)
    if error_type == "extra_forbidden":
        close = difflib.get_close_matches(key.rsplit(".", 1)[-1], siblings, n=1)
        guess = f"did you mean `{close[0]}`? " if close else ""
        where = f"unset {from_env} or " if from_env else ""
        return f"{guess}{where}remove it or check its spelling (`monitor config --defaults` prints every key)"
    if from_env and from_env.upper() != env_var_name(loc):
        hint = f"set `{key}` in {from_env}"
    else:
        hint = f"set {from_env or key}"
    if description:
        hint += f" to {description}"
    if ctx and "expected" in ctx:
        hint += f" (one of {ctx['expected']})"
    if from_env:
        return hint
    return f"{hint}; file key `{key}` or env {env_var_name(loc)}"


_MASKED_VALUES: Final = frozenset({("judge", "api_key_env")})
"""Settings whose rejected value is never quoted: a key pasted where the variable's name belongs."""


def _problems(exc: ValidationError) -> list[str]:
    out: list[str] = []
    for err in exc.errors():
        loc = tuple(err.get("loc", ()))
        _, description, siblings = _describe(loc)
        msg = err.get("msg", "invalid").removeprefix("Value error, ")
        fix = _fix_hint(loc, err.get("type", ""), description, err.get("ctx"), siblings)
        value = err.get("input")
        if value and (loc in _MASKED_VALUES or any(is_secret_name(str(part)) for part in loc)):
            value = MASK  # an unknown `api_key:` or a key given as api_key_env: never echo it
        out.append(format_problem(loc, value, msg, fix))
    return out


def _source_label(path: Path | None, from_env_var: bool) -> str:
    """``monitor.yaml``, ``monitor.yaml + MONITOR_* environment``, or ``environment``."""
    env_used = any(name.upper().startswith(ENV_PREFIX) and name.upper() != ENV_PREFIX + "CONFIG" for name in os.environ)
    if path is None:
        return "environment"
    shown = f"{path} (from {ENV_PREFIX}CONFIG)" if from_env_var else str(path)
    return f"{shown} + {ENV_PREFIX}* environment" if env_used else shown


def load_settings(path: str | Path | None = None, **overrides: Any) -> Settings:
    """Settings from ``path`` (or ``$MONITOR_CONFIG``), the environment and ``overrides``.

    Raises :class:`SettingsError` listing every bad value at once (each naming the environment
    variable when the value came from one, else the file key), its value (masked) and the fix.
    The returned settings remember their :attr:`Settings.source` for later messages.
    """
    from_env_var = False
    if path is None:
        env_path = os.environ.get(ENV_PREFIX + "CONFIG")
        path = Path(env_path) if env_path else None
        from_env_var = path is not None
    p = Path(path) if path is not None else None
    source = _source_label(p, from_env_var)
    if p is not None:
        label = f"{ENV_PREFIX}CONFIG = {str(p)!r}" if from_env_var else f"config file {str(p)!r}"
        if not p.is_file():
            raise SettingsError([f"{label}: the file does not exist. Fix: pass an existing YAML file"], source)
        try:
            doc = yaml.safe_load(p.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise SettingsError([f"{label}: not valid YAML: {exc}. Fix: correct the YAML syntax"], source) from exc
        if doc is not None and not isinstance(doc, dict):
            raise SettingsError([f"{label}: must hold a mapping of settings. Fix: use `key: value` lines"], source)
    _CURRENT_YAML["path"] = p
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        invalid = frozenset(str(err["loc"][0]) for err in exc.errors() if err.get("loc"))
        partial = _with_defaults_for(invalid, overrides)
        if partial is not None:
            partial._source = source
        raise SettingsError(_problems(exc), source, partial=partial, invalid_keys=invalid) from exc
    finally:
        _CURRENT_YAML["path"] = None
    settings._source = source
    return settings


def _with_defaults_for(keys: frozenset[str], overrides: dict[str, Any]) -> Settings | None:
    """The settings of the current sources with each top-level key in ``keys`` forced to its default
    (a section as a model instance replaces the whole section instead of merging into it); None
    when they still do not validate (an unknown top-level key, say)."""
    if not keys <= set(Settings.model_fields):
        return None
    forced = {key: Settings.model_fields[key].get_default(call_default_factory=True) for key in keys}
    try:
        return Settings(**{**overrides, **forced})
    except ValidationError:
        return None
