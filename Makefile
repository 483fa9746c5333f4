# One entry point per task. `make test` installs everything it needs itself (CI runs exactly that).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
FRAMEWORKS := adk2 adk2_openinference adk1 strands openai_v2 openai_agents_otel openai_agents_oi pydantic_ai_v1 openllmetry_legacy langgraph_oi langgraph_openllmetry traceloop_sdk_anthropic openinference_anthropic_stream \
  haystack dspy_oi agent_framework_legacy llama_index_oi smolagents_oi vercel_ai openinference_vercel mastra_arize langchainjs_oi
export DEBIAN_FRONTEND := noninteractive

.PHONY: install system-deps peers test lint typecheck unit fuzz demo demo-offline bench fixtures clean

# Debian packages the tests run for real: Prometheus + promtool, PostgreSQL (initdb/pg_ctl), Chromium (headless:
# the report's HTML rendered and screenshotted in tests/report).
system-deps:
	@command -v prometheus >/dev/null && command -v promtool >/dev/null && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
	  && command -v chromium >/dev/null || \
	  { apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus postgresql chromium >/dev/null; }

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q uv

# Re-installs only when pyproject.toml changes.
$(VENV)/.installed: pyproject.toml | $(PY)
	$(UV) pip install -q --python $(PY) -e '.[test]'
	touch $@

install: $(VENV)/.installed

lint: install
	$(PY) -m ruff check monitor tests bench dashboards deploy
	$(PY) -m ruff format --check monitor bench dashboards deploy
	$(VENV)/bin/lint-imports  # the package layering: [tool.importlinter] in pyproject.toml
	$(PY) -m pytest -q tests/deploy/test_helm_chart.py::test_chart_copies_match_sources  # `make sync-chart` ran

typecheck: install
	$(PY) -m mypy

# Peer environments for the differential tests (tests/peers/): one locked venv per peer, node_modules for
# Mastra; each is rebuilt only when its lock changes (sha256 stamp), so this is a no-op when nothing changed.
peers: install
	tests/peers/setup.sh

# Environments of the fixture generators that tests/integration/test_live_generators.py runs live (five
# Python venvs in .fixture-venvs/, four node_modules); like `peers`, each is rebuilt only when its lock changes.
.PHONY: generators clean-generators
generators: install
	tests/fixtures/generators/setup.sh

clean-generators:
	rm -rf .fixture-venvs tests/fixtures/generators/*/node_modules

# MONITOR_TEST_REQUIRE_POSTGRES: a missing PostgreSQL fails the suite instead of skipping its tests.
unit: install system-deps peers generators
	MONITOR_TEST_REQUIRE_POSTGRES=1 $(PY) -m pytest -q

test: lint typecheck unit

# On demand: the long form of the end-to-end fuzzing (CI runs a short form of the same tests in `unit`).
fuzz: install
	MONITOR_FUZZ_EXAMPLES=2000 MONITOR_FUZZ_DAEMON_RECORDS=3000 $(PY) -m pytest -q -o timeout=0 \
	  tests/fuzz tests/integration/test_fuzz_daemon.py

# The product on one machine: embedded broker, simulated agents, the daemon; live, then a summary.
demo: install
	$(PY) -m monitor demo

# The offline part: decode the bundled sample records (four frameworks, protobuf and OTLP/JSON,
# traces split across records) and print the rebuilt runs.
demo-offline: install
	$(PY) -m monitor inspect examples/records/*

# Each benchmark publishes its figures to bench/results/<name>.json; the last step writes README's figures table.
# About 25 minutes on 2 cores; run it on a quiet machine (every figure is a ratio measured in the same run, but the
# worker-pool and scale-out figures need the cores to themselves).
bench: install peers system-deps
	$(PY) bench/decode_rebuild.py
	$(PY) bench/pipeline.py
	$(PY) bench/store.py
	$(PY) bench/scorers.py
	$(PY) bench/scoring_stage.py
	$(PY) bench/consume.py
	$(PY) bench/e2e.py
	$(PY) bench/judges.py
	$(PY) bench/gc_freeze.py
	$(PY) bench/figures.py

# On demand: the one-hour soak at a fixed rate (resident memory flat, lag and open traces bounded); CI runs its
# two-minute form (tests/integration/test_soak.py). Publishes bench/results/soak.json.
.PHONY: soak
soak: install
	$(PY) bench/soak.py --minutes 60

# Re-record the framework fixtures (each framework in its own locked virtualenv).
fixtures: install
	tests/fixtures/generators/regenerate.sh $(FRAMEWORKS)

clean: clean-generators
	rm -rf $(VENV) .fixture-venvs .peer-venvs tests/peers/mastra/node_modules .pytest_cache .mypy_cache .ruff_cache

# Copy the alert rules and the dashboards into the Helm chart (helm/agent-tool-monitor/files/); `make lint`
# fails while the chart's copies differ from deploy/prometheus/rules.yaml and dashboards/*.json.
CHART_DIR ?= helm/agent-tool-monitor
CHART_RULES_SRC ?= deploy/prometheus/rules.yaml
CHART_DASHBOARDS_SRC ?= dashboards
.PHONY: sync-chart
sync-chart:
	rm -rf $(CHART_DIR)/files/prometheus $(CHART_DIR)/files/dashboards
	mkdir -p $(CHART_DIR)/files/prometheus $(CHART_DIR)/files/dashboards
	@if [ -f $(CHART_RULES_SRC) ]; then cp $(CHART_RULES_SRC) $(CHART_DIR)/files/prometheus/rules.yaml; \
	  else echo "sync-chart: no $(CHART_RULES_SRC) yet: the chart has no PrometheusRule content"; fi
	@for f in $(CHART_DASHBOARDS_SRC)/*.json; do if [ -f "$$f" ]; then cp "$$f" $(CHART_DIR)/files/dashboards/; fi; done
