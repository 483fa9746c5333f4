"""Export: the Prometheus metrics catalogue (:mod:`.metrics`), the label cardinality guard
(:mod:`.cardinality`) and the HTTP server for ``/metrics``, ``/healthz`` and ``/readyz`` (:mod:`.http`)."""

from monitor.export.cardinality import OTHER, UNKNOWN, CappedLabel, CardinalityGuard
from monitor.export.http import HealthState, HttpServer, Readiness
from monitor.export.metrics import Metrics

__all__ = ["OTHER", "UNKNOWN", "CappedLabel", "CardinalityGuard", "HealthState", "HttpServer", "Metrics", "Readiness"]
