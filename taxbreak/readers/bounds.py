"""Bounds on hostile Kineto JSON: defaults, the variables that raise them, the errors.

Traces are untrusted input. Each bound below stops one way a small file can
crash the reader or take unbounded time or memory; each has a default that no
real trace comes near, an error code (or a counted diagnostic where one event
can be dropped and the rest kept) and an environment variable that raises it
(docs/reliability.md, "Kineto JSON"):

* ``TAXBREAK_MAX_JSON_DEPTH`` (default 900): nesting levels of objects and
  lists anywhere in the file -> ``json.too_deep``;
* ``TAXBREAK_MAX_NUMBER_CHARS`` (64) and ``TAXBREAK_MAX_NUMBER_EXPONENT`` (400):
  the text of one ``ts``/``dur`` number and its decimal exponent ->
  diagnostic ``event.number_out_of_range`` (the event is dropped);
* ``TAXBREAK_MAX_STRING_BYTES`` (64 MiB): one event, string or other value the
  streaming reader must hold whole -> ``json.too_long``;
* ``TAXBREAK_MAX_INFLATED_BYTES`` (32 GiB) and ``TAXBREAK_MAX_INFLATE_RATIO``
  (200, checked once 64 MiB are inflated): the uncompressed size of a
  ``.json.gz`` and its ratio to the compressed bytes read -> ``gzip.too_large``
  / ``gzip.ratio``;
* ``TAXBREAK_MAX_SPAN_S`` (2**53 ns, ~104 days): the time from the first to the
  last event and the longest duration -> ``kineto.time_range`` (a duration
  beyond it drops its event with ``event.number_out_of_range``).

The values are read when a trace is opened, so a variable set in the
environment of ``taxbreak`` (or in ``os.environ`` before a call) applies.
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from ..trace.errors import TraceFormatError

ENV_DEPTH = "TAXBREAK_MAX_JSON_DEPTH"
ENV_NUMBER_CHARS = "TAXBREAK_MAX_NUMBER_CHARS"
ENV_NUMBER_EXPONENT = "TAXBREAK_MAX_NUMBER_EXPONENT"
ENV_STRING_BYTES = "TAXBREAK_MAX_STRING_BYTES"
ENV_INFLATED_BYTES = "TAXBREAK_MAX_INFLATED_BYTES"
ENV_INFLATE_RATIO = "TAXBREAK_MAX_INFLATE_RATIO"
ENV_SPAN_S = "TAXBREAK_MAX_SPAN_S"

DEFAULT_DEPTH = 900  # below CPython's default recursion limit (1,000), which msgspec's decoder obeys
DEFAULT_NUMBER_CHARS = 64  # Kineto writes at most ~20 ("1695835573023613.123")
DEFAULT_NUMBER_EXPONENT = 400  # beyond float64's range either way
DEFAULT_STRING_BYTES = 64 << 20
DEFAULT_INFLATED_BYTES = 32 << 30  # ~150 M events; 10 M events are ~2.2 GB of JSON
DEFAULT_INFLATE_RATIO = 200  # Kineto JSON inflates ~8-10x; gzip's own maximum is ~1,032x
RATIO_FLOOR_BYTES = 64 << 20  # small files may compress far better: the ratio counts from here
DEFAULT_SPAN_NS = 1 << 53  # ~104 days; also the largest int a float64 holds exactly
_STACK_MARGIN = 200  # Python frames below the decoder (CLI, reader) on top of the JSON depth


@dataclass(frozen=True)
class Bounds:
    """The bounds in force for one read (see module doc)."""

    depth: int = DEFAULT_DEPTH
    number_chars: int = DEFAULT_NUMBER_CHARS
    number_exponent: int = DEFAULT_NUMBER_EXPONENT
    string_bytes: int = DEFAULT_STRING_BYTES
    inflated_bytes: int = DEFAULT_INFLATED_BYTES
    inflate_ratio: float = DEFAULT_INFLATE_RATIO
    span_ns: int = DEFAULT_SPAN_NS


def current() -> Bounds:
    """The bounds from the environment, defaults where a variable is unset or not a positive number."""
    span_s = _env_number(ENV_SPAN_S, None)
    return Bounds(
        depth=int(_env_number(ENV_DEPTH, DEFAULT_DEPTH)),
        number_chars=int(_env_number(ENV_NUMBER_CHARS, DEFAULT_NUMBER_CHARS)),
        number_exponent=int(_env_number(ENV_NUMBER_EXPONENT, DEFAULT_NUMBER_EXPONENT)),
        string_bytes=int(_env_number(ENV_STRING_BYTES, DEFAULT_STRING_BYTES)),
        inflated_bytes=int(_env_number(ENV_INFLATED_BYTES, DEFAULT_INFLATED_BYTES)),
        inflate_ratio=_env_number(ENV_INFLATE_RATIO, DEFAULT_INFLATE_RATIO),
        span_ns=DEFAULT_SPAN_NS if span_s is None else min(int(span_s * 1e9), (1 << 62) - 1),
    )


def _env_number(name: str, default):
    text = os.environ.get(name, "").strip()
    try:
        value = float(text)
    except ValueError:
        return default
    return value if value > 0 and value == value and value != float("inf") else default


@contextmanager
def json_depth(bounds: Bounds) -> Iterator[None]:
    """Let the decoder nest ``bounds.depth`` levels: msgspec stops at the
    interpreter's recursion limit, which is raised for the read when needed."""
    before = sys.getrecursionlimit()
    wanted = bounds.depth + _STACK_MARGIN
    if wanted > before:
        sys.setrecursionlimit(wanted)
    try:
        yield
    finally:
        if wanted > before:
            sys.setrecursionlimit(before)


def _path_text(path) -> str | None:
    """The error's path; None below the layer that knows it (the reader fills it in)."""
    return None if path is None else str(path)


def too_deep(path, bounds: Bounds) -> TraceFormatError:
    """The error for a RecursionError of the decoder (a value nested too deep)."""
    return TraceFormatError(
        "json.too_deep",
        f"JSON nested deeper than {bounds.depth:,} levels",
        _path_text(path),
        hint=f"no profiler writes such nesting; {ENV_DEPTH} raises the bound",
    )


def too_long(path, bounds: Bounds, held: int) -> TraceFormatError:
    """The error for one value (event, string, run of spaces) the stream cannot hold."""
    return TraceFormatError(
        "json.too_long",
        f"more than {bounds.string_bytes:,} bytes without an event boundary",
        _path_text(path),
        location=f"{held:,} bytes buffered",
        hint=f"a single event or string this long is not a profiler's; {ENV_STRING_BYTES} raises the bound",
    )


def check_inflated(path, bounds: Bounds, inflated: int, compressed: int) -> None:
    """Raise ``gzip.too_large`` / ``gzip.ratio`` when an inflating stream passes a bound."""
    if inflated > bounds.inflated_bytes:
        raise TraceFormatError(
            "gzip.too_large",
            f"the gzip stream inflates to more than {bounds.inflated_bytes:,} bytes",
            _path_text(path),
            location=f"compressed byte {compressed:,}",
            hint=f"{ENV_INFLATED_BYTES} raises the bound",
        )
    if inflated > RATIO_FLOOR_BYTES and inflated > bounds.inflate_ratio * max(compressed, 1):
        raise TraceFormatError(
            "gzip.ratio",
            f"the gzip stream inflates more than {bounds.inflate_ratio:g}x "
            f"({inflated:,} bytes from {compressed:,}): a decompression bomb?",
            _path_text(path),
            location=f"compressed byte {compressed:,}",
            hint=f"Kineto JSON inflates ~10x; {ENV_INFLATE_RATIO} raises the bound",
        )


def check_span(path, bounds: Bounds, first_ns: int, last_ns: int) -> None:
    """Raise ``kineto.time_range`` when the events span more than the bound (exact Python ints)."""
    if last_ns - first_ns > bounds.span_ns:
        raise TraceFormatError(
            "kineto.time_range",
            f"the events span {(last_ns - first_ns) / 1e9 / 86400:,.0f} days, "
            f"beyond the {bounds.span_ns / 1e9 / 86400:,.0f}-day bound",
            _path_text(path),
            location=f"ts from {first_ns / 1000:.0f} to {last_ns / 1000:.0f} µs",
            hint=f"timestamps out of any profiler's range; {ENV_SPAN_S} (seconds) raises the bound",
        )
