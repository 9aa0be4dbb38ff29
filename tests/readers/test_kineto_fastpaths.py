"""The fast column conversions of the Kineto reader agree exactly with the slow,
obviously-correct per-value paths they short-cut (Arrow decimal cast for µs
text, Arrow int64 for ids, one numpy call for grid/block triples, buffers for
raw args text)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from taxbreak.readers import kineto_columns as C
from taxbreak.readers import kineto_text as T
from taxbreak.readers.kineto_events import InvalidUtf8


def _reference_ns(texts: list[bytes]) -> tuple[list[int], list[int]]:
    """Per-value Decimal conversion: the definition the fast paths must match."""
    pairs = [T._one_us_text_to_ns(t) for t in texts]
    return [v for v, _ in pairs], [s for _, s in pairs]


def _check_ns(texts: list[bytes]) -> None:
    ns, state = T.us_text_to_ns(texts)
    want_ns, want_state = _reference_ns(texts)
    assert state.tolist() == want_state
    assert ns.tolist() == want_ns


def test_decimal_path_takes_kineto_texts_exactly():
    texts = [b"1695835573023613.123", b"0.5", b"12", b"-3.250", b"", b"7.000"]
    got = T._decimal_column(texts)
    assert got is not None  # the common case never leaves the fast path
    ns, state = got
    assert ns.tolist() == [1695835573023613123, 500, 12000, -3250, 0, 7000]
    assert state.tolist() == [T.OK, T.OK, T.OK, T.OK, T.MISSING, T.OK]


@pytest.mark.parametrize(
    "odd",
    [b"1.2345", b"1e3", b"1.5E-4", b"null", b'"12.5"', b"true", b"[1]", b"99999999999999999.999", b"9300000000000000.000"],
)
def test_texts_the_decimal_cast_refuses_fall_back_to_the_same_result(odd):
    # sub-ns digits (truncated), exponents, non-numbers, beyond int64 ns: all as the per-value path says
    texts = [b"1.000", odd, b"2.500"]
    _check_ns(texts)


def test_value_just_beyond_int64_is_not_wrapped():
    ns, state = T.us_text_to_ns([b"9223372036854775.808", b"1.0"])
    assert state.tolist() == [T.OUT_OF_RANGE, T.OK]
    assert ns.tolist() == [0, 1000]


_NUMBER_TEXT = st.one_of(
    st.integers(-(10**15), 10**17).map(lambda n: f"{n // 1000}.{n % 1000:03d}".encode()),
    st.decimals(allow_nan=False, allow_infinity=False, min_value=-(10**12), max_value=10**12, places=4).map(
        lambda d: str(d).encode()
    ),
    st.integers(-(10**12), 10**12).map(lambda n: str(n).encode()),
    st.sampled_from([b"", b"null", b"1e3", b"-2.5E+2", b'"x"', b"0.0001"]),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_NUMBER_TEXT, min_size=1, max_size=30))
def test_us_text_to_ns_matches_decimal_reference(texts):
    _check_ns(texts)


_ID = st.one_of(
    st.none(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(width=64),  # NaN and infinities included
    st.booleans(),
    st.sampled_from(["0x1f", "12", "Spans", " 7 "]),
    st.lists(st.integers(0, 5), max_size=3),  # grid-like lists where an id was expected
    st.just({"a": 1}),
)


def _numpy_int_ids(values: list, default: int = -1) -> list[int]:
    """The numpy conversion ``int_ids``' fast path (``np.fromiter``) must equal (its definition)."""
    for attempt in (lambda: values, lambda: [default if v is None else v for v in values]):
        try:
            ids = np.array(attempt(), dtype=np.int64)
        except (TypeError, ValueError, OverflowError):
            continue
        if ids.shape == (len(values),):
            return ids.tolist()
    return [T._one_id(v, default) for v in values]


@settings(max_examples=300, deadline=None)
@given(st.lists(_ID, max_size=20))
def test_int_ids_match_the_numpy_definition(values):
    want = _numpy_int_ids(values)
    beyond = [i for i, v in enumerate(want) if v is T._BEYOND]  # NaN, infinities, floats past int64
    if beyond:
        with pytest.raises(T.IdOutOfRange) as info:
            T.int_ids(values)
        assert info.value.positions == beyond
    else:
        assert T.int_ids(values).tolist() == want


def test_int_ids_common_cases_exact():
    assert T.int_ids([1, None, 2**62]).tolist() == [1, -1, 2**62]
    assert T.int_ids([2**64 - 1, 3]).tolist() == [-1, 3]  # uint64 tid wraps to two's complement
    # a column with strings is read per value: hex parsed, a non-integer float is no id
    assert T.int_ids(["0x10", 5, None, 2.9]).tolist() == [16, 5, -1, -1]
    assert T.int_ids([5, None, 2.9]).tolist() == [5, -1, 2]  # numbers only: truncated
    assert T.int_ids([]).tolist() == []


def test_triples_fast_and_fallback_agree():
    kernels = [[8, 32, 1], [66, 1, 1]]
    x, y, z = C._triples(kernels)
    assert (x.tolist(), y.tolist(), z.tolist()) == ([8, 66], [32, 1], [1, 1])
    mixed = [[8, 32, 1], None, "grid(100,)", [1, 2], [4, None, 1]]
    x, y, z = C._triples(mixed)
    assert x.tolist() == [8, -1, -1, -1, 4]
    assert y.tolist() == [32, -1, -1, -1, -1]
    assert z.tolist() == [1, -1, -1, -1, 1]


def test_raw_text_is_canonical_text_with_nulls():
    import msgspec

    from taxbreak.trace.schema import TEXT

    raws = [msgspec.Raw(b"[[1, 2]]"), msgspec.Raw(), msgspec.Raw(b'["float"]'), msgspec.Raw(b"[[1, 2]]")]
    array = C._raw_text(raws)
    assert array.type == TEXT
    assert array.to_pylist() == ["[[1, 2]]", None, '["float"]', "[[1, 2]]"]
    assert array.dictionary.to_pylist() == ["[[1, 2]]", '["float"]']  # each distinct text once
    empty = C._raw_text([msgspec.Raw(), msgspec.Raw()])
    assert empty.null_count == 2 and empty.type == TEXT


def test_raw_text_rejects_invalid_utf8():
    import msgspec

    with pytest.raises(InvalidUtf8):
        C._raw_text([msgspec.Raw(b'"\xff\xfe"')])


def test_concat_widens_to_int64():
    col = C._concat([np.array([1, 2], dtype=np.int32), np.array([2**40], dtype=np.int64)])
    assert col.dtype == np.int64 and col.tolist() == [1, 2, 2**40]


def _inflate_threads() -> list:
    import threading

    return [t for t in threading.enumerate() if t.name == "taxbreak-inflate"]


def test_inflate_thread_stops_when_the_reader_stops_early(tmp_path):
    import gzip
    import os

    from taxbreak.readers import kineto_stream as ks

    path = tmp_path / "noise.json.gz"
    path.write_bytes(gzip.compress(os.urandom(1 << 20) * 8, compresslevel=1))  # many blocks
    blocks = ks.iter_blocks(path)
    assert len(next(blocks)) > 0
    blocks.close()  # the reader gives up (e.g. StreamFallback) after one block
    assert _inflate_threads() == []


def test_inflate_errors_are_raised_in_the_reading_thread(tmp_path):
    import gzip

    from taxbreak.readers import kineto_stream as ks

    whole = gzip.compress(b'{"traceEvents": []}' * 50_000)
    path = tmp_path / "short.json.gz"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ks.StreamFallback, match="ends early"):
        b"".join(ks.iter_blocks(path))
    assert _inflate_threads() == []


def test_release_freed_heap_is_safe_to_call():
    from taxbreak.trace.memory import release_freed_heap

    assert release_freed_heap() is None
