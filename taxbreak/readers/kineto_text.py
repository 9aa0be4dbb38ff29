"""Exact decoding of Kineto numbers and ids, vectorized.

Kineto writes ``ts``/``dur`` in microseconds with a 3-digit ns fraction
(``ns/1000 "." ns%1000``, libkineto ``output_json.cpp``). Old traces hold
absolute epoch µs such as ``1695835573023613.123``: 19 significant digits, more
than a float64 keeps (~16), so the reader never goes through float. It keeps the
raw JSON text of each value (``msgspec.Raw``) and turns a whole column of texts
into int64 ns at once with numpy: the digits left of the dot weigh
``10**(k + 3)`` ns, the first three right of it ``100, 10, 1`` ns.
Sub-ns digits are truncated. Texts the fast path cannot read (exponents,
quoted strings, ``null``) go through a small per-value path.

The common column is converted faster still by Arrow: cast to ``decimal128(22, 3)``
the texts become exact fixed-point numbers whose unscaled integer *is* the ns
value. Arrow refuses (and the numpy path above takes over) anything that would
need rounding (sub-ns digits), anything that is not a number, and values beyond
22 digits; a value beyond int64 sends the column to the numpy path too.

Hostile texts (docs/reliability.md): a column holding an exponent or a text of
more than 38 characters never reaches Arrow's cast (it crashes on exponents
below about -4.5 million and misreads some long texts), and the per-value path
checks the length and exponent bounds (:mod:`bounds`) before building any
``Decimal``: such values are ``OUT_OF_RANGE``, and their events are dropped.
"""
from __future__ import annotations

import re
from decimal import Context, Decimal, DecimalException

import numpy as np
import pyarrow as pa

from . import bounds as B

OK = 0
MISSING = 1
WRONG_TYPE = 2
OUT_OF_RANGE = 3  # beyond int64 ns, or a text past the number bounds (readers/bounds.py)

_POW10 = np.array([10**k for k in range(19)], dtype=np.int64)
_COMMA = ord(",")
_DOT = ord(".")
_MINUS = ord("-")


def us_text_to_ns(texts: list, bounds: B.Bounds = B.Bounds()) -> tuple[np.ndarray, np.ndarray]:
    """Microsecond JSON number texts to exact int64 nanoseconds.

    Args:
        texts: one bytes-like JSON text per value (``msgspec.Raw``); an empty
            text means the field was absent.

    Returns:
        ``(ns, state)``: int64 ns (0 where not OK) and uint8 state per value:
        ``OK``, ``MISSING`` (absent or ``null``), ``WRONG_TYPE`` or
        ``OUT_OF_RANGE`` (beyond int64 ns, or a text longer than
        ``bounds.number_chars`` or with an exponent beyond ``bounds.number_exponent``).
    """
    n = len(texts)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.uint8)
    exact = _decimal_column(texts, bounds)
    if exact is not None:
        return exact
    joined = b",".join(texts) + b","
    buf = np.frombuffer(joined, dtype=np.uint8)
    ends = np.flatnonzero(buf == _COMMA)
    if len(ends) != n:  # a text holds a comma itself (a list or a string): not a number
        return _slow_column(texts, np.arange(n), np.zeros(n, np.int64), np.zeros(n, np.uint8), bounds)
    ns, state = _fast_column(buf, ends)
    lengths = np.diff(ends, prepend=-1) - 1
    state[lengths > bounds.number_chars] = WRONG_TYPE  # the per-value path applies the length bound
    redo = np.flatnonzero(state == WRONG_TYPE)
    if len(redo):
        _slow_column(texts, redo, ns, state, bounds)
    return ns, state


_NS_DECIMAL = pa.decimal128(22, 3)  # 19 integer digits of µs + 3 of ns: beyond int64 ns


def _decimal_column(texts: list, bounds: B.Bounds = B.Bounds()) -> tuple[np.ndarray, np.ndarray] | None:
    """Arrow's exact string -> decimal cast (see module doc); None when it cannot
    take the whole column. Absent values (empty texts) are nulls: ``MISSING``."""
    lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    joined = b"".join(texts)
    if not _plain_numbers(joined, lengths, bounds):
        return None
    offsets = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    present = lengths > 0
    valid = None if present.all() else pa.py_buffer(np.packbits(present, bitorder="little"))
    strings = pa.LargeStringArray.from_buffers(len(texts), pa.py_buffer(offsets), pa.py_buffer(joined), valid)
    try:
        fixed = strings.cast(_NS_DECIMAL)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    # decimal128 is two little-endian 64-bit words: the value fits int64 when the
    # high word is the sign extension of the low one
    words = np.frombuffer(fixed.buffers()[1], dtype=np.int64, count=2 * len(texts))
    ns, high = words[0::2].copy(), words[1::2]
    if not np.array_equal(high[present], ns[present] >> 63):
        return None
    ns[~present] = 0
    return ns, np.where(present, OK, MISSING).astype(np.uint8)


def _plain_numbers(joined: bytes, lengths: np.ndarray, bounds: B.Bounds) -> bool:
    """False when a text is long or has an exponent: those never reach Arrow's
    decimal cast, which crashes the process on exponents below about -4.5 million
    and misreads some texts of more than 38 digits (they take the numpy and
    per-value paths, which check the bounds first). Two ``memchr`` scans and a
    max: ~0.1 ms per 10 k values."""
    longest = min(bounds.number_chars, _ARROW_MAX_CHARS)
    return int(lengths.max()) <= longest and joined.find(b"e") < 0 and joined.find(b"E") < 0


# Arrow's cast returns 0, silently, for "1." followed by 42 zeros (pyarrow 26): texts longer than
# decimal128's 38 digits take the numpy path, which is exact (tests/malformed/test_hostile.py)
_ARROW_MAX_CHARS = 38


def _fast_column(buf: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Plain decimal texts (``-?digits(.digits)?``) separated by commas at ``ends``."""
    n = len(ends)
    starts = np.empty(n, dtype=np.int64)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    tok = np.repeat(np.arange(n), ends - starts + 1)  # token index of every byte, its comma included
    is_digit = (buf >= 48) & (buf <= 57)
    is_dot = buf == _DOT
    is_minus = buf == _MINUS
    bad = ~(is_digit | is_dot | is_minus | (buf == _COMMA))
    state = np.zeros(n, dtype=np.uint8)
    state[tok[bad]] = WRONG_TYPE
    dots = np.flatnonzero(is_dot)
    dot_tok = tok[dots]
    dup = dot_tok[np.flatnonzero(np.diff(dot_tok) == 0)] if len(dots) > 1 else dot_tok[:0]
    state[dup] = WRONG_TYPE
    dot_at = ends.copy()
    dot_at[dot_tok] = dots
    minus_pos = np.flatnonzero(is_minus)
    state[tok[minus_pos[minus_pos != starts[tok[minus_pos]]]]] = WRONG_TYPE  # '-' only first
    digits = np.flatnonzero(is_digit)
    d_tok = tok[digits]
    rel = dot_at[d_tok] - digits  # >0: integer digit, <0: fraction digit
    exp = np.where(rel > 0, rel + 2, 3 + rel)
    state[d_tok[exp > 18]] = WRONG_TYPE  # beyond int64 ns
    # a leading 9 at 10**18 ns may overflow int64 (max 9.22e18): the per-value path decides
    state[d_tok[(exp == 18) & (buf[digits] == ord("9"))]] = WRONG_TYPE
    keep = (exp >= 0) & (exp <= 18)
    contrib = np.zeros(len(buf), dtype=np.int64)
    contrib[digits[keep]] = (buf[digits[keep]].astype(np.int64) - 48) * _POW10[exp[keep]]
    ns = np.add.reduceat(contrib, starts)
    ns[is_minus[starts]] *= -1
    lens = ends - starts
    n_digits = np.bincount(d_tok, minlength=n)
    state[(n_digits == 0) & (state == OK)] = WRONG_TYPE
    state[lens == 0] = MISSING
    ns[state != OK] = 0
    return ns, state


def _slow_column(texts: list, idx: np.ndarray, ns: np.ndarray, state: np.ndarray,
                 bounds: B.Bounds) -> tuple[np.ndarray, np.ndarray]:
    """Per-value decoding of the few texts the fast path rejected (rare)."""
    for i in idx.tolist():
        value, st = _one_us_text_to_ns(bytes(texts[i]), bounds)
        ns[i] = value
        state[i] = st
    return ns, state


_EXPONENT = re.compile(rb"[eE]([+-]?)0*(\d*)$")
# exact arithmetic on bounded texts: 64 digits and an exponent of 400 need far less than this
_EXACT = Context(prec=1000, Emax=10**6, Emin=-(10**6))
_INT64_LOW, _INT64_END = Decimal(-(2**63)), Decimal(2**63)


def _one_us_text_to_ns(text: bytes, bounds: B.Bounds = B.Bounds()) -> tuple[int, int]:
    text = text.strip()
    if not text or text == b"null":
        return 0, MISSING
    if text[:1] in (b'"', b"[", b"{", b"t", b"f"):
        return 0, WRONG_TYPE
    if len(text) > bounds.number_chars or _exponent_beyond(text, bounds.number_exponent):
        return 0, OUT_OF_RANGE  # checked before any Decimal or int is built from the text
    try:
        value = _EXACT.multiply(Decimal(text.decode("ascii")), 1000)
    except (DecimalException, UnicodeDecodeError, ValueError):
        return 0, WRONG_TYPE
    if not value.is_finite():
        return 0, WRONG_TYPE
    if not _INT64_LOW <= value < _INT64_END:
        return 0, OUT_OF_RANGE
    return int(value), OK


def _exponent_beyond(text: bytes, limit: int) -> bool:
    match = _EXPONENT.search(text)
    if match is None:
        return False
    digits = match.group(2)
    return len(digits) > len(str(limit)) or int(digits or b"0") > limit


class IdOutOfRange(Exception):
    """Ids of a column that no int64 holds (positions in the column): their events are dropped."""

    def __init__(self, positions: list[int]) -> None:
        super().__init__(f"{len(positions)} ids out of range")
        self.positions = positions


def int_ids(values: list, default: int = -1) -> np.ndarray:
    """JSON ids (pid, tid, correlation, stream...) to int64; -1 where absent.

    Kineto ids are ints, but real traces also hold strings: ``pid "Spans"``,
    ROCm ``stream "0x0"``. Numeric and hex strings are read as numbers; other
    strings and missing values become ``default``; float values are truncated
    (Kineto ids are integers; only ``blocks per SM``-like args are floats).
    Values above the int64 range (uint64 tids) wrap to their two's complement.

    Raises:
        IdOutOfRange: a value beyond uint64 or below int64, a float beyond
            int64, or a numeric string of either kind (the reader drops its event).
    """
    n = len(values)
    try:  # all ints (pid, tid, ...): np.fromiter takes ~25 ns a value, pa.array ~300 here
        return np.fromiter(values, dtype=np.int64, count=n)
    except (TypeError, ValueError, OverflowError):
        pass
    try:  # ints and absent values: Arrow is the fastest with nulls. It refuses bools, strings
        # and uint64 (the numpy attempt below takes over); it truncates floats exactly as numpy
        # does (tests/readers/test_kineto_fastpaths.py checks every path against np.array)
        ids = pa.array(values, type=pa.int64())
        return ids.fill_null(default).to_numpy() if ids.null_count else ids.to_numpy()
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        pass
    try:
        return np.fromiter([default if v is None else v for v in values], dtype=np.int64, count=n)
    except (TypeError, ValueError, OverflowError):
        pass
    ids = [_one_id(v, default) for v in values]
    beyond = [i for i, v in enumerate(ids) if v is _BEYOND]
    if beyond:
        raise IdOutOfRange(beyond)
    return np.array(ids, dtype=np.int64)


def link_ids(values: list) -> tuple[np.ndarray, np.ndarray]:
    """Correlation / External ids (:func:`int_ids`), and the positions of values that are no
    integer: a fraction (5.5) or a boolean (true) links nothing, so it is read as absent (-1)
    instead of being truncated to another event's id (5, 1). An integral float (5.0) is 5."""
    kinds = set(map(type, values))
    if bool not in kinds and float not in kinds:
        return int_ids(values), np.zeros(0, np.int64)
    odd = np.fromiter((type(v) is bool or (type(v) is float and not v.is_integer()) for v in values),
                      dtype=bool, count=len(values))
    positions = np.flatnonzero(odd)
    if not len(positions):
        return int_ids(values), positions
    values = list(values)
    for i in positions.tolist():
        values[i] = None
    return int_ids(values), positions


_BEYOND = object()  # an id no int64 holds
_ID_TEXT_CHARS = 66  # "0x" and 64 hex digits: far past uint64; longer strings are never parsed
_NUMERIC_ID = re.compile(r"[+-]?(0[xX][0-9a-fA-F_]+|[0-9_]+)")


def _one_id(value, default: int):
    if type(value) is int:
        if -(2**63) <= value < 2**63:
            return value
        return value - 2**64 if 2**63 <= value < 2**64 else _BEYOND
    if isinstance(value, float):
        if not abs(value) < 2**63:
            return _BEYOND
        return int(value) if value.is_integer() else default
    if isinstance(value, str):
        if len(value) > _ID_TEXT_CHARS:
            return _BEYOND if _NUMERIC_ID.fullmatch(value.strip()) else default
        try:
            return _one_id(int(value.strip(), 0), default)
        except ValueError:
            return default
    return default
