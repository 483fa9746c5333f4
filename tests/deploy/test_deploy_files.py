"""The image and the local stack (deploy/), checked without a Docker engine (none runs here).

* deploy/Dockerfile: linted by tally (PyPI ``tally-cli``: hadolint's DL rules, ShellCheck on RUN scripts, BuildKit's
  own checks; pinned, every finding of every severity fails) and parsed by BuildKit's parser (PyPI ``dockerfile``)
  for its structure: multi-stage, python:3.11-slim, the wheel built in the builder, nothing but the virtualenv
  copied into the final stage, no compiler or package install there, ``USER 10001``, a HEALTHCHECK on /healthz
  that is run here against a local HTTP server.
* deploy/compose.yaml: validated, after Compose's variable interpolation, against the Compose Specification's
  JSON Schema (vendored in tests/deploy/schemas/compose-spec.json) plus the cross-references ``docker compose
  config`` resolves (services, volumes, configs, files on disk); the daemon's environment is loaded by the
  monitor's own settings; Prometheus' inline configuration and the rules pass ``promtool check config``.
* deploy/otel-collector.yaml: every component is validated against the configuration schemas the Collector's
  components publish (``config.schema.yaml`` of the Kafka exporter, the OTLP receiver, the batch and
  memory_limiter processors; vendored in tests/deploy/schemas/otelcol/, unknown keys rejected as the Collector
  rejects them), the pipelines reference defined components, and the topics, keys and encoding match what the
  daemon reads.
* deploy/grafana/provisioning: the datasource and the dashboard provider point where compose.yaml puts them.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dockerfile
import jsonschema
import pytest
import yaml
from referencing import Registry, Resource

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SCHEMAS = Path(__file__).resolve().parent / "schemas"
DOCKERFILE = DEPLOY / "Dockerfile"
COMPOSE = DEPLOY / "compose.yaml"
COLLECTOR = DEPLOY / "otel-collector.yaml"
GRAFANA = DEPLOY / "grafana" / "provisioning"


# --------------------------------------------------------------------------- Dockerfile


def tally(path: Path) -> list[dict[str, Any]]:
    """Every finding of tally on ``path`` (all rules, no config file, no network: slow checks off)."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tally_cli",
            "lint",
            "--format",
            "json",
            "--no-config",
            "--slow-checks",
            "off",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(out.stdout)
    return [v for f in report.get("files") or [] for v in f.get("violations") or []]


def test_dockerfile_lints_clean() -> None:
    findings = [
        f"{v['severity']} {v['rule']} line {v['location']['start']['line']}: {v['message']}" for v in tally(DOCKERFILE)
    ]
    assert findings == []


def test_the_linter_catches_what_hadolint_would(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text(
        "FROM python:latest\nRUN cd /app && pip install requests\nADD . /app\nUSER root\nCMD python app.py\n"
    )
    rules = {v["rule"] for v in tally(bad)}
    assert {"hadolint/DL3007", "hadolint/DL3003", "hadolint/DL3020", "hadolint/DL3002", "hadolint/DL3057"} <= rules


def _stages() -> tuple[dict[str, str], list[list[Any]]]:
    """(ARG defaults before the first FROM, the instructions of each stage)."""
    args: dict[str, str] = {}
    stages: list[list[Any]] = []
    for command in dockerfile.parse_file(str(DOCKERFILE)):
        if command.cmd == "FROM":
            stages.append([command])
        elif stages:
            stages[-1].append(command)
        elif command.cmd == "ARG":
            name, _, default = command.value[0].partition("=")
            args[name] = default
    return args, stages


def _base_image(from_: Any, args: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], from_.value[0])


def test_dockerfile_is_multi_stage_small_and_non_root() -> None:
    args, stages = _stages()
    assert len(stages) == 2
    builder, final = stages
    assert [_base_image(s[0], args) for s in stages] == ["python:3.11-slim", "python:3.11-slim"]
    assert [v.lower() for v in builder[0].value[1:]] == ["as", "builder"]

    build_script = "\n".join(c.original for c in builder if c.cmd == "RUN")
    assert "pip wheel --wheel-dir /wheels ." in build_script  # the wheel is built in the builder
    assert "--no-index --find-links /wheels agent-tool-monitor" in build_script
    for command in (c for c in builder if c.cmd == "COPY"):
        for source in command.value[:-1]:
            assert (ROOT / source).exists(), source  # build context = the repository root
    assert not any(c.cmd == "ADD" for s in stages for c in s)

    final_cmds = [c.cmd for c in final]
    copies = [c for c in final if c.cmd == "COPY"]
    assert [(c.flags, c.value) for c in copies] == [(("--from=builder",), ("/opt/venv", "/opt/venv"))]
    final_scripts = "\n".join(c.original for c in final if c.cmd == "RUN")
    for forbidden in ("apt-get", "apk ", "pip ", "gcc", "build-essential", "make ", "curl", "wget"):
        assert forbidden not in final_scripts, forbidden  # no compiler, no package manager run, no downloads
    users = [c.value[0] for c in final if c.cmd == "USER"]
    assert users and users[-1].split(":")[0] == "10001"
    assert final_cmds.index("USER") > final_cmds.index("COPY")
    assert [c.value for c in final if c.cmd == "EXPOSE"] == [("9464",)]
    (entrypoint,) = (c for c in final if c.cmd == "ENTRYPOINT")
    assert entrypoint.json and entrypoint.value == ("monitor",)
    (cmd,) = (c for c in final if c.cmd == "CMD")
    assert cmd.json and cmd.value[0] == "run"


class _Health(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status if self.path == "/healthz" else 404)
        self.end_headers()
        self.wfile.write(b"ok\n")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def health_server() -> Iterator[tuple[int, type[_Health]]]:
    handler = type("Handler", (_Health,), {"status": 200})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], handler
    server.shutdown()
    server.server_close()
    thread.join(5)


def test_healthcheck_probes_healthz_and_fails_when_it_fails(health_server: tuple[int, type[_Health]]) -> None:
    """The HEALTHCHECK's exec form, run as Docker would (with the image's interpreter: this one)."""
    _, stages = _stages()
    (check,) = (c for c in stages[-1] if c.cmd == "HEALTHCHECK")
    assert check.json and check.value[0] == "CMD"
    flags = dict(f.lstrip("-").split("=", 1) for f in check.flags)
    assert {"interval", "timeout", "start-period", "retries"} <= flags.keys()
    argv = [sys.executable if check.value[1] == "python" else check.value[1], *check.value[2:]]
    port, handler = health_server
    env = {**os.environ, "MONITOR_HTTP__PORT": str(port)}
    assert subprocess.run(argv, env=env, capture_output=True, timeout=30).returncode == 0
    handler.status = 503  # /healthz failing: unhealthy
    assert subprocess.run(argv, env=env, capture_output=True, timeout=30).returncode != 0
    env["MONITOR_HTTP__PORT"] = "1"  # nothing listening: unhealthy
    assert subprocess.run(argv, env=env, capture_output=True, timeout=30).returncode != 0


# --------------------------------------------------------------------------- compose.yaml

_VAR = re.compile(
    r"\$(?:\$|\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}|(?P<bare>[A-Za-z_]\w*))"
)


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's variable interpolation (``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``, ``$$``), applied to
    every string, as ``docker compose config`` does before validating."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group("name") or m.group("bare")
        op, arg = m.group("op"), m.group("arg") or ""
        present = name in env
        if op == ":-":
            return env[name] if env.get(name) else arg
        if op == "-":
            return env[name] if present else arg
        if op in (":?", "?"):
            if not env.get(name) if op == ":?" else not present:
                raise ValueError(f"required variable {name} is missing: {arg}")
            return env[name]
        return env.get(name, "")

    return _VAR.sub(one, value)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    doc: dict[str, Any] = interpolate(yaml.safe_load(COMPOSE.read_text()), {})
    return doc


def test_compose_file_matches_the_compose_specification(compose: dict[str, Any]) -> None:
    schema = json.loads((SCHEMAS / "compose-spec.json").read_text())
    validator = jsonschema.Draft7Validator(schema)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(compose)]
    assert errors == []
    # the schema has teeth: a typo and a wrong type are refused
    broken = json.loads(json.dumps(compose))
    broken["services"]["monitor"]["restrat"] = "always"
    broken["services"]["kafka"]["ports"] = "9094:9094"
    assert len(list(validator.iter_errors(broken))) >= 2


def test_compose_references_resolve(compose: dict[str, Any]) -> None:
    """What `docker compose config` resolves: services, named volumes, configs, files and build context."""
    services = compose["services"]
    assert set(services) == {"kafka", "otel-collector", "monitor", "prometheus", "grafana"}
    volumes, configs = set(compose.get("volumes", {})), set(compose.get("configs", {}))
    published: list[str] = []
    for name, service in services.items():
        depends = service.get("depends_on", [])
        for dependency in depends if isinstance(depends, list) else depends.keys():
            assert dependency in services, (name, dependency)
        for mount in service.get("volumes", []):
            if isinstance(mount, str):
                source = mount.split(":")[0]
                if not source.startswith((".", "/")):
                    assert source in volumes, (name, source)
                    continue
                mount = {"type": "bind", "source": source}
            if mount["type"] == "volume":
                assert mount["source"] in volumes, (name, mount)
            elif mount["type"] == "bind":
                assert (DEPLOY / mount["source"]).exists(), (name, mount["source"])
        for config in service.get("configs", []):
            assert config["source"] in configs, (name, config)
        for port in service.get("ports", []):
            published.append(str(port).split(":")[0])
        image = service.get("image", "")
        assert ":" in image and not image.endswith(":latest"), (name, image)  # pinned images
    assert len(published) == len(set(published)), published
    build = services["monitor"]["build"]
    assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == DOCKERFILE


def test_compose_daemon_settings_are_valid_monitor_settings(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from monitor.settings import load_settings

    for name in list(os.environ):
        if name.upper().startswith("MONITOR_"):
            monkeypatch.delenv(name)
    environment = compose["services"]["monitor"]["environment"]
    for name, value in environment.items():
        if name.startswith("MONITOR_"):
            monkeypatch.setenv(name, str(value))
    settings = load_settings(None)
    kafka_host = compose["services"]["kafka"]["hostname"]
    assert settings.kafka.bootstrap_servers == f"{kafka_host}:9092"
    assert settings.http.port == 9464
    assert str(compose["services"]["monitor"]["ports"][0]).startswith("9464:")
    monitor = compose["services"]["monitor"]
    assert monitor["read_only"] is True and monitor["user"].startswith("10001")
    assert "/tmp" in monitor["tmpfs"]
    assert any(str(v).endswith(":/var/lib/monitor") for v in monitor["volumes"])  # the SQLite file's volume


def _compose_mount(compose: dict[str, Any], service: str, target: str) -> Path:
    for mount in compose["services"][service]["volumes"]:
        if isinstance(mount, dict) and mount["target"] == target:
            return (DEPLOY / mount["source"]).resolve()
    raise AssertionError(f"{service} mounts nothing at {target}")


def test_prometheus_config_and_rules_pass_promtool(compose: dict[str, Any], tmp_path: Path) -> None:
    prometheus = compose["services"]["prometheus"]
    (config_ref,) = prometheus["configs"]
    content = yaml.safe_load(compose["configs"][config_ref["source"]]["content"])
    assert config_ref["target"] in [a.split("=", 1)[1] for a in prometheus["command"] if a.startswith("--config.file=")]
    (rule_glob,) = content["rule_files"]
    rules_target = "/etc/prometheus/rules/agent-tool-monitor.yaml"
    assert Path(rules_target).match(rule_glob)
    rules = _compose_mount(compose, "prometheus", rules_target)
    assert rules == (DEPLOY / "prometheus" / "rules.yaml").resolve()
    assert rules.is_file(), "deploy/prometheus/rules.yaml is missing: run deploy/prometheus/generate.py"
    (job,) = content["scrape_configs"]
    assert job["job_name"] == "agent-tool-monitor"
    assert job["static_configs"][0]["targets"] == ["monitor:9464"]
    local = dict(content, rule_files=[str(rules)])
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(local))
    out = subprocess.run(
        ["promtool", "check", "config", str(tmp_path / "prometheus.yml")], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_grafana_provisioning_matches_compose(compose: dict[str, Any]) -> None:
    datasources = yaml.safe_load((GRAFANA / "datasources" / "prometheus.yaml").read_text())
    assert datasources["apiVersion"] == 1
    (source,) = datasources["datasources"]
    assert source["type"] == "prometheus" and source["isDefault"] is True
    assert source["url"] == "http://prometheus:9090" and "prometheus" in compose["services"]
    providers = yaml.safe_load((GRAFANA / "dashboards" / "agent-tool-monitor.yaml").read_text())
    assert providers["apiVersion"] == 1
    (provider,) = providers["providers"]
    assert provider["type"] == "file"
    dashboards = _compose_mount(compose, "grafana", provider["options"]["path"])
    assert dashboards == (ROOT / "dashboards").resolve()
    assert _compose_mount(compose, "grafana", "/etc/grafana/provisioning") == GRAFANA.resolve()
    for path in dashboards.glob("*.json"):  # each provisioned dashboard can pick this datasource
        variables = json.loads(path.read_text()).get("templating", {}).get("list", [])
        kinds = {v.get("query") for v in variables if v.get("type") == "datasource"}
        assert kinds in (set(), {"prometheus"}), path.name


# --------------------------------------------------------------------------- otel-collector.yaml

OTELCOL = SCHEMAS / "otelcol"
# component type → (distribution root, module path) of its config.schema.yaml
COMPONENT_SCHEMAS = {
    ("receivers", "otlp"): ("core", "receiver/otlpreceiver"),
    ("processors", "batch"): ("core", "processor/batchprocessor"),
    ("processors", "memory_limiter"): ("core", "processor/memorylimiterprocessor"),
    ("exporters", "kafka"): ("contrib", "exporter/kafkaexporter"),
}
CORE_MODULE = "go.opentelemetry.io/collector/"


def _uri(root: str, module: str) -> str:
    return f"urn:otelcol:{root}:{module}"


def _convert(node: Any, root: str, module: str, unresolved: set[str], in_all_of: bool = False) -> Any:
    """A Collector ``config.schema.yaml`` node as JSON Schema 2020-12: its ``$ref`` forms (``name`` in the same
    file, ``./sub.name`` and ``/path.name`` in the same repository, ``go.opentelemetry.io/collector/path.name``
    in the core repository) become URIs of the vendored files, and an object met outside an ``allOf`` refuses
    keys no branch evaluated (the Collector's decoder rejects unknown keys: ``has invalid keys``)."""
    if isinstance(node, list):
        return [_convert(n, root, module, unresolved, in_all_of) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key.startswith("x-") or key == "$defs":
            continue
        if key == "$ref":
            ref_root, ref_module, _, name = root, module, None, value
            if "." in value and ("/" in value or value.startswith(".")):
                path, _, name = value.rpartition(".")
                if path.startswith(CORE_MODULE):
                    ref_root, ref_module = "core", path[len(CORE_MODULE) :]
                elif path.startswith("./"):
                    ref_module = f"{module}/{path[2:]}"
                elif path.startswith("/"):
                    ref_module = path[1:]
                else:
                    unresolved.add(value)
                    continue
            if not (OTELCOL / ref_root / ref_module / "config.schema.yaml").is_file():
                unresolved.add(value)  # not vendored: anything goes there
                continue
            out["$ref"] = f"{_uri(ref_root, ref_module)}#/$defs/{name}"
        elif key == "allOf":
            out[key] = [_convert(n, root, module, unresolved, in_all_of=True) for n in value]
        elif key == "properties":
            out[key] = {k: _convert(v, root, module, unresolved) for k, v in value.items()}
        else:
            out[key] = _convert(value, root, module, unresolved)
    if not in_all_of and (out.get("type") == "object" or "$ref" in out or "allOf" in out):
        out["unevaluatedProperties"] = False
    if out.get("type") == "object" and "properties" not in out and "allOf" not in out and "$ref" not in out:
        out.pop("unevaluatedProperties", None)  # a free-form object (an empty struct, a map)
    return out


def _defs_strictly(defs: dict[str, Any], root: str, module: str, unresolved: set[str]) -> dict[str, Any]:
    # $defs are referenced from properties (strict at the reference) and from allOf (lenient): keep them lenient
    return {name: _convert(d, root, module, unresolved, in_all_of=True) for name, d in defs.items()}


def collector_registry() -> tuple[Registry, set[str]]:
    unresolved: set[str] = set()
    resources = []
    for path in sorted(OTELCOL.glob("*/**/config.schema.yaml")):
        root, module = path.relative_to(OTELCOL).parts[0], "/".join(path.relative_to(OTELCOL).parts[1:-1])
        raw = yaml.safe_load(path.read_text())
        doc = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": _uri(root, module),
            "$defs": _defs_strictly(raw.get("$defs", {}), root, module, unresolved),
            **{
                k: v
                for k, v in _convert({k: v for k, v in raw.items() if k != "$defs"}, root, module, unresolved).items()
            },
        }
        resources.append((doc["$id"], Resource.from_contents(doc)))
    return Registry().with_resources(resources), unresolved


def collector_component_errors(kind: str, component_id: str, config: Any) -> list[str]:
    component_type = component_id.split("/", 1)[0]
    assert (kind, component_type) in COMPONENT_SCHEMAS, f"no vendored schema for {kind} {component_type}"
    registry, _ = collector_registry()
    root, module = COMPONENT_SCHEMAS[(kind, component_type)]
    validator = jsonschema.Draft202012Validator({"$ref": _uri(root, module)}, registry=registry)
    return [
        f"{kind}.{component_id}.{'.'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator.iter_errors(config or {})
    ]


@pytest.fixture(scope="module")
def collector() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(COLLECTOR.read_text())
    return doc


def test_collector_components_match_their_published_schemas(collector: dict[str, Any]) -> None:
    errors = [
        error
        for kind in ("receivers", "processors", "exporters")
        for component_id, config in collector.get(kind, {}).items()
        for error in collector_component_errors(kind, component_id, config)
    ]
    assert errors == []
    assert set(collector) <= {"receivers", "processors", "exporters", "extensions", "connectors", "service"}


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"topic": "otlp_spans"}, "topic"),  # the pre-v0.124 top-level key: gone, the Collector refuses it
        ({"partition_trace_by_id": True}, "partition_trace_by_id"),
        ({"traces": {"topic": "otlp_spans", "encodng": "otlp_proto"}}, "encodng"),
        ({"partition_traces_by_id": "yes"}, "partition_traces_by_id"),
        ({"producer": {"compression": "gzip", "max_mesage_bytes": 1}}, "max_mesage_bytes"),
        ({"tls": {"ca_fille": "/ca.crt"}}, "ca_fille"),
    ],
)
def test_collector_schema_refuses_unknown_and_mistyped_keys(
    collector: dict[str, Any], change: dict[str, Any], complaint: str
) -> None:
    exporter = {**collector["exporters"]["kafka"], **change}
    errors = collector_component_errors("exporters", "kafka", exporter)
    assert errors and any(complaint in e for e in errors), errors


def test_collector_pipelines_feed_the_daemon(collector: dict[str, Any], compose: dict[str, Any]) -> None:
    pipelines = collector["service"]["pipelines"]
    assert set(pipelines) == {"traces", "logs"}
    used: set[tuple[str, str]] = set()
    for pipeline in pipelines.values():
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                assert component in collector[kind], (kind, component)
                used.add((kind, component))
    defined = {(kind, c) for kind in ("receivers", "processors", "exporters") for c in collector.get(kind, {})}
    assert defined == used  # nothing defined and left unused
    for pipeline in pipelines.values():
        assert pipeline["processors"][0] == "memory_limiter"  # first, as the Collector recommends

    exporter = collector["exporters"][pipelines["traces"]["exporters"][0]]
    env = compose["services"]["monitor"]["environment"]
    assert exporter["partition_traces_by_id"] is True  # a trace's records on one partition (docs/daemon.md)
    assert exporter["traces"] == {"topic": env["MONITOR_KAFKA__SPANS_TOPIC"], "encoding": "otlp_proto"}
    logs_exporter = collector["exporters"][pipelines["logs"]["exporters"][0]]
    assert logs_exporter["logs"] == {"topic": env["MONITOR_KAFKA__LOGS_TOPIC"], "encoding": "otlp_proto"}
    assert logs_exporter["partition_logs_by_trace_id"] is True
    assert exporter["brokers"] == [env["MONITOR_KAFKA__BOOTSTRAP_SERVERS"]]
    # the compression must be one the daemon's client reads without extra packages
    from kafka import codec

    compression = exporter.get("producer", {}).get("compression", "none")
    assert compression in ("none", "gzip") and codec.has_gzip()
    receiver = collector["receivers"]["otlp"]["protocols"]
    published = {str(p).split(":")[0] for p in compose["services"]["otel-collector"]["ports"]}
    assert {receiver["grpc"]["endpoint"].rsplit(":", 1)[1], receiver["http"]["endpoint"].rsplit(":", 1)[1]} == published
    command = compose["services"]["otel-collector"]["command"]
    target = next(a.split("=", 1)[1] for a in command if a.startswith("--config="))
    assert _compose_mount(compose, "otel-collector", target) == COLLECTOR.resolve()


def test_vendored_collector_schemas_resolve() -> None:
    """Every reference the checked components reach is vendored, but for two the config above never uses."""
    _, unresolved = collector_registry()
    assert unresolved <= {
        "./internal/kafkaclient.record_header",  # record_headers items
        "./internal/request.sizer_type",  # exporterhelper's $defs alias, unused
        "./internal.option",  # exporterhelper's $defs alias, unused
    }, unresolved


@pytest.mark.parametrize(
    ("doc", "after"),
    [
        ("docs/deploy.md", "writes to Kafka. `deploy/otel-collector.yaml`"),
        ("README.md", "so one consumer sees a whole trace"),
    ],
)
def test_collector_snippets_in_the_docs_match_the_schema(doc: str, after: str) -> None:
    text = (ROOT / doc).read_text()
    at = text.index(after)
    found = re.search(r"```yaml\n(.*?)\n```", text[at:], re.DOTALL)
    assert found
    snippet = yaml.safe_load(found.group(1))
    exporter = snippet["exporters"]["kafka"]
    assert exporter["partition_traces_by_id"] is True
    assert collector_component_errors("exporters", "kafka", exporter) == []
