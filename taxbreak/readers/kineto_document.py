"""A whole Kineto trace as one JSON value in memory, for tools that rewrite it (``annotate``).

Held to the reader's bounds (:mod:`bounds`): the gzip inflate bounds, the nesting
depth (``json.too_deep``), and duplicate top-level keys refused
(``json.duplicate_key``) so that the rewritten copy holds the events the
analysis read, not another copy of them.
"""
from __future__ import annotations

import re
from pathlib import Path

import msgspec

from . import bounds as B
from .kineto_io import read_trace_bytes
from .kineto_keys import DuplicateKey, duplicate_key_error, object_members


def read_document(path: str | Path):
    """The decoded JSON value of the trace at ``path`` (plain or gzip).

    Raises:
        TraceNotFoundError / TraceFormatError: as :func:`kineto_io.read_trace_bytes`,
            and ``json.too_deep``, ``json.duplicate_key``.
        msgspec.DecodeError: the content is not valid JSON.
    """
    bounds = B.current()
    data, _ = read_trace_bytes(Path(path), False, bounds)
    try:
        with B.json_depth(bounds):
            return _decode(data)
    except RecursionError:
        raise B.too_deep(path, bounds) from None
    except DuplicateKey as err:
        raise duplicate_key_error(path, err.key) from None


_NON_SPACE = re.compile(rb"\S")


def _decode(data):
    first = _NON_SPACE.search(data)  # not data.lstrip(): that would copy the whole trace
    if first is None or data[first.start()] != ord("{"):
        return msgspec.json.decode(data)
    members = object_members(data)
    return {key: msgspec.json.decode(raw) for key, raw in members.items()}
