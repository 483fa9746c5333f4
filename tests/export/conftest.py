"""Fixtures of the export tests: a real Prometheus server factory (``prometheus``) and helpers."""

from __future__ import annotations

from tests.support.prometheus import prometheus

__all__ = ["prometheus"]
