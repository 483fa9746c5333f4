"""Every setting of the monitor in one catalogue.

Sources, highest priority first: keyword arguments, ``MONITOR_*`` environment variables (nested
keys joined with ``__``: ``MONITOR_KAFKA__BOOTSTRAP_SERVERS``), the YAML file given to
:func:`load_settings` (or ``MONITOR_CONFIG``), then the defaults below. A bad value raises
:class:`SettingsError`, whose message names each bad key, the value given and how to fix it.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

ENV_PREFIX = "MONITOR_"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KafkaSettings(_Section):
    bootstrap_servers: str = Field("127.0.0.1:9092", description="host:port[,host:port…] of the Kafka brokers")
    spans_topic: str = Field("otlp_spans", min_length=1, description="topic the Collector's Kafka exporter writes")
    logs_topic: str | None = Field(None, description="optional topic of OTLP logs carrying GenAI events")
    group_id: str = Field("agent-tool-monitor", min_length=1, description="consumer group id")
    encoding: Literal["auto", "otlp_proto", "otlp_json"] = Field(
        "auto", description="record encoding; auto detects JSON by a leading '{'"
    )
    dead_letter_suffix: str = Field(".dlq", min_length=1, description="dead-letter topic = <topic><suffix>")
    session_timeout_ms: int = Field(10_000, ge=1_000, description="consumer group session timeout in ms")
    heartbeat_interval_ms: int = Field(1_000, ge=100, description="heartbeat interval in ms (< session timeout)")
    max_poll_records: int = Field(500, ge=1, description="records per poll")
    commit_interval_s: float = Field(5.0, gt=0, description="seconds between offset commits")
    auto_offset_reset: Literal["earliest", "latest"] = Field("earliest", description="where a new group starts reading")

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


class SamplingSettings(_Section):
    rate: float = Field(1.0, ge=0, le=1, description="fraction of runs scored (deterministic on the trace id)")
    per_agent: dict[str, float] = Field(default_factory=dict, description="rate per agent name (overrides rate)")
    per_scorer: dict[str, float] = Field(default_factory=dict, description="rate per scorer id (applied on top)")
    always_if_errored: bool = Field(True, description="always score runs whose root span or a tool call errored")
    always_if_flagged: bool = Field(
        True, description="always run sampled-out scorers when a code check flagged the run"
    )
    always_attributes: dict[str, str] = Field(
        default_factory=dict, description="always score runs whose root/resource attribute has this value"
    )
    salt: str = Field("", description="changes which runs a rate selects, identically on every replica")


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
        description="reference-free checks run on every sampled run",
    )
    score_children: bool = Field(True, description="score nested agent runs as runs of their own")


class ShutdownSettings(_Section):
    drain_deadline_s: float = Field(30.0, gt=0, description="on SIGTERM: finish, score and commit within this time")


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
    dead_letter: DeadLetterSettings = Field(default_factory=DeadLetterSettings)  # type: ignore[arg-type]
    http: HttpSettings = Field(default_factory=HttpSettings)  # type: ignore[arg-type]
    store: StoreSettings = Field(default_factory=StoreSettings)  # type: ignore[arg-type]
    sampling: SamplingSettings = Field(default_factory=SamplingSettings)  # type: ignore[arg-type]
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)  # type: ignore[arg-type]
    scoring: ScoringSettings = Field(default_factory=ScoringSettings)  # type: ignore[arg-type]
    shutdown: ShutdownSettings = Field(default_factory=ShutdownSettings)  # type: ignore[arg-type]
    rules_file: Path | None = Field(None, description="YAML file of per-agent rules (SCORING.md §3.9)")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="log level")

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
    """A configuration that cannot be used; ``problems`` lists one line per bad key."""

    def __init__(self, problems: list[str], source: str) -> None:
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"invalid configuration ({source}):\n{lines}")


def _describe(loc: tuple[Any, ...]) -> tuple[str, str | None, list[str]]:
    """Dotted key, the field's description and the valid sibling keys, walking the settings models."""
    key = ".".join(str(p) for p in loc)
    model: Any = Settings
    description = None
    siblings: list[str] = list(Settings.model_fields)
    for part in loc:
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
    key: str, error_type: str, description: str | None, ctx: dict[str, Any] | None, siblings: list[str]
) -> str:
    env = ENV_PREFIX + key.upper().replace(".", "__")
    if error_type == "extra_forbidden":
        close = difflib.get_close_matches(key.rsplit(".", 1)[-1], siblings, n=1)
        guess = f"did you mean `{close[0]}`? " if close else ""
        return f"{guess}remove it or check its spelling (`monitor config --defaults` prints every key)"
    hint = f"set {key}"
    if description:
        hint += f" to {description}"
    if ctx and "expected" in ctx:
        hint += f" (one of {ctx['expected']})"
    return f"{hint}; file key `{key}` or env {env}"


def _problems(exc: ValidationError) -> list[str]:
    out: list[str] = []
    for err in exc.errors():
        loc = tuple(err.get("loc", ()))
        key, description, siblings = _describe(loc)
        value = err.get("input")
        shown = repr(value) if not isinstance(value, dict) else "{…}"
        msg = err.get("msg", "invalid")
        fix = _fix_hint(key, err.get("type", ""), description, err.get("ctx"), siblings)
        out.append(f"{key or '<root>'} = {shown}: {msg}. Fix: {fix}")
    return out


def load_settings(path: str | Path | None = None, **overrides: Any) -> Settings:
    """Settings from ``path`` (or ``$MONITOR_CONFIG``), the environment and ``overrides``.

    Raises :class:`SettingsError` naming every bad key, its value and the fix.
    """
    if path is None:
        env_path = os.environ.get(ENV_PREFIX + "CONFIG")
        path = Path(env_path) if env_path else None
    source = str(path) if path is not None else "environment"
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise SettingsError([f"config file {p} does not exist. Fix: pass an existing YAML file"], source)
        try:
            doc = yaml.safe_load(p.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise SettingsError([f"{p} is not valid YAML: {exc}. Fix: correct the YAML syntax"], source) from exc
        if doc is not None and not isinstance(doc, dict):
            raise SettingsError([f"{p} must hold a mapping of settings. Fix: use `key: value` lines"], source)
        path = p
    _CURRENT_YAML["path"] = Path(path) if path is not None else None
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise SettingsError(_problems(exc), source) from exc
    finally:
        _CURRENT_YAML["path"] = None
