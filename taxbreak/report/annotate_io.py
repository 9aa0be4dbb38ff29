"""Exact I/O for ``taxbreak annotate``: the original events pass through as text.

The trace is decoded only down to its top-level keys (``dict[str, msgspec.Raw]``),
so every original event, and every other top-level value, is copied as the
bytes it was written with: a ``ts`` of ``1712195495521131.125`` stays exactly
that, in either time base. The added events are appended inside the raw
``traceEvents`` array, with their times written as decimal µs text from int ns
(three decimals), never through a float.
"""
from __future__ import annotations

import gzip
from pathlib import Path

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..readers import bounds as B
from ..readers import kineto_io
from ..readers.kineto_keys import DuplicateKey, duplicate_key_error, object_members
from ..trace.errors import TraceFormatError, UnsupportedFormatError
from ..trace.fileio import output_target, write_output

_LIST = msgspec.json.Decoder(msgspec.Raw)
_WHITESPACE = b" \t\r\n"


def read_trace_bytes(path: str | Path) -> bytes | bytearray:
    """The trace's JSON text (gzip or plain), held to the reader's inflate bounds
    (``gzip.too_large``, ``gzip.ratio``: docs/reliability.md)."""
    data, _ = kineto_io.read_trace_bytes(Path(path), False, B.current())
    return data


def split_document(raw: bytes, path: str | Path = "") -> tuple[dict[str, msgspec.Raw] | None, bytes]:
    """``(top-level keys, traceEvents array text)``; keys are None for a bare list trace.

    The reader's rules hold here too, so the copy holds the events the analysis
    read: ``json.too_deep`` past the nesting bound and ``json.duplicate_key``
    for a top-level key written twice (Chrome and the reader would keep
    different copies)."""
    stripped = bytes(raw).strip(_WHITESPACE)
    bounds = B.current()
    try:
        with B.json_depth(bounds):
            if stripped[:1] == b"[":
                _LIST.decode(stripped)  # validates the whole array
                return None, stripped
            top = object_members(stripped)
    except RecursionError:
        raise B.too_deep(path, bounds) from None
    except DuplicateKey as err:
        raise duplicate_key_error(path, err.key) from None
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise UnsupportedFormatError("format.unknown", "annotate needs a Kineto JSON trace", path=str(path),
                                     hint="Nsight exports cannot be annotated; give the .json/.json.gz trace") from err
    events = bytes(top.get("traceEvents", b""))
    if events[:1] != b"[":
        raise TraceFormatError("kineto.no_events", "JSON without a traceEvents list", path=str(path))
    return top, events


def splice_events(array: bytes, added: bytes) -> bytes:
    """``array`` (a JSON array's text) with ``added`` (comma-joined events) appended."""
    if not added:
        return array
    body = array[1:-1].strip(_WHITESPACE)
    return b"".join((b"[", body, b"," if body else b"", added, b"]"))


def join_document(top: dict[str, msgspec.Raw] | None, array: bytes) -> bytes:
    """The document again: the same top-level values, the new events array."""
    if top is None:
        return array
    top = dict(top)
    top["traceEvents"] = msgspec.Raw(array)
    return msgspec.json.encode(top)


def us_text(ns: int) -> msgspec.Raw:
    """Exact µs JSON text of an int ns time: ``1712195495521131125`` -> ``1712195495521131.125``."""
    sign = "-" if ns < 0 else ""
    whole, rest = divmod(abs(int(ns)), 1000)
    return msgspec.Raw(f"{sign}{whole}.{rest:03d}".encode())


def us_texts(ns: np.ndarray) -> list[msgspec.Raw]:
    """:func:`us_text` of every value, the digits built in bulk by Arrow."""
    ns = np.asarray(ns, dtype=np.int64)
    if len(ns) == 0:
        return []
    magnitude = np.abs(ns)
    whole = pc.cast(pa.array(magnitude // 1000), pa.string())
    rest = pc.utf8_lpad(pc.cast(pa.array(magnitude % 1000), pa.string()), 3, "0")
    text = pc.binary_join_element_wise(whole, rest, ".")
    if (ns < 0).any():
        text = pc.if_else(pa.array(ns < 0), pc.binary_join_element_wise("-", text, ""), text)
    return [msgspec.Raw(t) for t in pc.cast(text, pa.binary()).to_pylist()]


def encode_events(events: list[dict]) -> bytes:
    """The added events as comma-joined JSON objects (no surrounding brackets)."""
    if not events:
        return b""
    return msgspec.json.encode(events)[1:-1]


def write_document(data: bytes, output: str | Path, inputs=()) -> None:
    """``data`` to ``output``, gzip-compressed when its name ends in .gz (zlib level 6:
    ISA-L's fastest levels take a tenth of the time but write a ~45 % larger file).
    Written atomically, never onto ``inputs`` or through a link (:mod:`taxbreak.trace.fileio`)."""
    out = Path(output)
    output_target(out, inputs=inputs)  # refused before the compression's cost
    write_output(out, gzip.compress(data, compresslevel=6, mtime=0) if out.name.endswith(".gz") else data,
                 inputs=inputs)
