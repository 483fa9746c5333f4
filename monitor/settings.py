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
:class:`SettingsError` is masked.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PrivateAttr,
    SecretStr,
    ValidationError,
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
    startup_timeout_s: float = Field(
        10.0, gt=0, description="at startup, give up reaching the brokers after this many seconds (exit 4)"
    )

    @field_validator("bootstrap_servers")
    @classmethod
    def _host_port_list(cls, value: str) -> str:
        for entry in value.split(","):
            problem = _host_port_problem(entry.strip())
            if problem:
                raise ValueError(f"{entry.strip()!r} {problem}; write host:port[,host:port…]")
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
    evaluation_events: EvaluationEventsSettings = Field(default_factory=EvaluationEventsSettings)  # type: ignore[arg-type]
    rules_file: Path | None = Field(None, description="YAML file of per-agent rules (SCORING.md §3.9)")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="log level")
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

_SECRET_WORDS = re.compile(r"password|passwd|secret|token|credential", re.IGNORECASE)
_SECRET_NAMES = frozenset({"pwd", "pass", "key", "apikey", "api_key", "api-key", "private_key", "sslkey"})
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@]*):(?P<secret>[^\s@]*)@")
_NAME_VALUE = re.compile(r"(?P<head>(?<![\w.\-])(?P<name>[A-Za-z_][\w.\-]*)=)(?P<value>[^\s&#;,'\")]+)")
MASK = "***"


def is_secret_name(name: str) -> bool:
    """True for parameter names whose values are secrets: any name containing ``password``,
    ``passwd``, ``secret``, ``token`` or ``credential``, and ``key``, ``api_key``, ``pwd``… exactly."""
    return bool(_SECRET_WORDS.search(name)) or name.lower() in _SECRET_NAMES


def mask_secrets(text: str) -> str:
    """``text`` with every secret replaced by ``***``: the password of each ``scheme://user:password@``
    URL, and the value of each ``name=value`` pair (URL query or DSN) whose name :func:`is_secret_name`.

    Errs on the side of masking: a ``scheme://a:b@`` that was not a password is masked too.
    """
    masked = _URL_PASSWORD.sub(lambda m: f"{m['head']}:{MASK}@" if m["secret"] != MASK else m[0], text)

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
    return mask_secrets(rendered)


def _mask_tree(value: Any) -> Any:
    if isinstance(value, str):
        return mask_url(value)
    if isinstance(value, dict):
        return {k: MASK if is_secret_name(str(k)) and v else _mask_tree(v) for k, v in value.items()}
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


def _problems(exc: ValidationError) -> list[str]:
    out: list[str] = []
    for err in exc.errors():
        loc = tuple(err.get("loc", ()))
        _, description, siblings = _describe(loc)
        msg = err.get("msg", "invalid").removeprefix("Value error, ")
        fix = _fix_hint(loc, err.get("type", ""), description, err.get("ctx"), siblings)
        out.append(format_problem(loc, err.get("input"), msg, fix))
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
