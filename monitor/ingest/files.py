"""Record files: what ``monitor inspect`` and ``monitor eval --traces`` read.

A file holds Kafka record values in one of these layouts, detected from its content:

* one OTLP/JSON document (one record), or JSON Lines with one ``ExportTraceServiceRequest`` per
  line (the OTel Collector file exporter's ``json`` format);
* one serialized protobuf ``ExportTraceServiceRequest`` (one record, as stored by
  ``kcat -e -D ''`` or our fixtures);
* a stream of protobuf messages each prefixed with its length as a 4-byte big-endian integer (the
  Collector file exporter's ``proto`` format), recognised when the prefixes tile the file exactly.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path


def split_records(data: bytes) -> Iterator[bytes]:
    """The record values held in ``data`` (see the module docstring for layouts)."""
    stripped = data.lstrip()
    if stripped.startswith(b"{"):
        try:
            json.loads(stripped)
        except (ValueError, RecursionError):
            for line in data.splitlines():
                if line.strip():
                    yield line
            return
        yield data
        return
    framed = _length_prefixed(data)
    if framed is not None:
        yield from framed
        return
    if data:
        yield data


def _length_prefixed(data: bytes) -> list[bytes] | None:
    out: list[bytes] = []
    pos = 0
    size = len(data)
    while pos < size:
        if pos + 4 > size:
            return None
        (length,) = struct.unpack_from(">I", data, pos)
        pos += 4
        if length == 0 or pos + length > size:
            return None
        out.append(data[pos : pos + length])
        pos += length
    # a single protobuf message that happens to start with a plausible prefix is very unlikely to
    # tile the file exactly more than once; require at least one frame and exact tiling
    return out if out else None


def read_records(path: Path) -> list[bytes]:
    return list(split_records(path.read_bytes()))
