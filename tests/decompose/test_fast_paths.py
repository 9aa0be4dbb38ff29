"""The fast paths of the decomposer agree exactly with their plain definitions."""
from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from taxbreak.decompose.intervals import (_dense_pairs_lexsort, _enclosing_disjoint, covered_before, dense_pairs,
                                          innermost_enclosing, union_intervals, unique_inverse)
from taxbreak.decompose.partition import _sums
from taxbreak.decompose.summary import _Codes, _us, _us_list
from taxbreak.trace.nesting import lane_clock, nesting, small_lanes

_ints = st.lists(st.integers(-50, 50), max_size=40)


@settings(max_examples=200, deadline=None)
@given(st.integers(-2**50 + 1, 2**50 - 1))
def test_us_skips_round_only_where_it_is_exact(ns):
    assert _us(ns) == round(float(ns) / 1000.0, 3)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-2**62, 2**62), st.booleans()), max_size=30))
def test_us_list_is_us_per_value(pairs):
    """The column-wise µs conversion of the per-scope summaries equals ``_us`` on each value."""
    ns = np.array([n for n, _ in pairs], dtype=np.int64)
    valid = np.array([ok for _, ok in pairs], dtype=bool)
    assert _us_list(ns, valid) == [_us(n) if ok else None for n, ok in pairs]
    assert _us_list(ns) == [_us(n) for n, _ in pairs]


def test_us_keeps_unmeasured_and_large_values():
    assert _us(None) is None and _us(pd.NA) is None and _us(float("nan")) is None
    assert _us(2**60) == round(float(2**60) / 1000.0, 3)
    assert _us(1234.5) == 1.234  # floats still go through round()


@settings(max_examples=200, deadline=None)
@given(_ints)
def test_unique_inverse_matches_numpy(values):
    arr = np.array(values, dtype=np.int64)
    uniq, inv = unique_inverse(arr)
    ref_uniq, ref_inv = np.unique(arr, return_inverse=True)
    assert uniq.tolist() == ref_uniq.tolist() and inv.tolist() == ref_inv.ravel().tolist()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3)), max_size=30), st.booleans())
def test_dense_pairs_packed_matches_lexsort(pairs, far):
    a = np.array([p[0] for p in pairs], dtype=np.int64) * (2**60 if far else 1)
    b = np.array([p[1] for p in pairs], dtype=np.int64)
    got, ref = dense_pairs(a, b), _dense_pairs_lexsort(a, b)
    assert all(x.tolist() == y.tolist() for x, y in zip(got, ref))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-40, 40), st.integers(0, 15)), max_size=12), _ints)
def test_covered_before_matches_brute_force(ivs, times):
    start, end = union_intervals(np.array([s for s, _ in ivs], np.int64), np.array([s + d for s, d in ivs], np.int64))
    t = np.array(times, dtype=np.int64)
    want = [sum(max(0, min(e, x) - s) for s, e in zip(start.tolist(), end.tolist())) for x in t.tolist()]
    assert covered_before(start, end, t).tolist() == want


def test_lane_clock_ranks_when_offsets_would_overflow():
    start = np.array([-2**62, 0, 2**62], dtype=np.int64)
    clock = lane_clock(3, [start])
    assert clock.values is not None  # rank mode
    keys = clock.key(np.array([2, 0, 1]), start)
    assert clock.split(keys)[0].tolist() == [2, 0, 1] and clock.split(keys)[1].tolist() == start.tolist()
    assert lane_clock(3, [np.array([5, 9])]).values is None  # offset mode: no sort


def test_nesting_same_with_huge_or_negative_lane_ids():
    lane = np.array([7, 7, 7, 3, 3], dtype=np.int64)
    start = np.array([0, 1, 2, 0, 0], dtype=np.int64)
    dur = np.array([10, 5, 0, 4, 4], dtype=np.int64)
    dense = nesting(lane, start, dur)
    for shifted in (lane * 2**58, lane - 2**62):
        got = nesting(shifted, start, dur)
        assert got[0].tolist() == dense[0].tolist() and got[1].tolist() == dense[1].tolist()
    assert small_lanes(lane * 2**58)[1] == 2  # replaced by ranks


def test_partition_sums_exact_beyond_float_precision():
    codes = np.array([0, 1, 0, 1], dtype=np.int64)
    big = np.array([2**53 + 1, 3, 2**53 + 3, 0], dtype=np.int64)
    assert _sums(codes, big, 2).tolist() == [2**54 + 4, 3]
    assert _sums(codes, np.array([1, 2, 3, 4]), 3).tolist() == [4, 6, 0]


def test_group_codes_for_ints_ranges_and_names():
    steps = _Codes(pd.Index([5, 2, -1, 9]), 4)
    assert steps(np.array([9, 2, 7, -1, 5])).tolist() == [3, 1, -1, 2, 0]
    assert _Codes(pd.Index(range(3)), 3)(np.array([0, 2, 3, -1])).tolist() == [0, 2, -1, -1]
    assert _Codes(pd.Index(["decode", "prefill"]), 2)(np.array(["prefill", "x"], dtype=object)).tolist() == [1, -1]
    assert _Codes(pd.Index([], dtype=np.int64), 0)(np.array([1])).tolist() == [-1]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.integers(0, 6)), min_size=1, max_size=12),
       st.lists(st.tuples(st.integers(0, 1), st.integers(-2, 40)), min_size=1, max_size=10))
def test_enclosing_among_disjoint_intervals(cuts, queries):
    """Among disjoint intervals the answer is the one interval holding t (search path or,
    with a zero-length interval at another's start, the nesting sweep)."""
    lanes, starts, ends = [], [], []
    cursor = {0: 0, 1: 0}
    for lane, gap_and_len in cuts:  # back to back or spaced, zero-length allowed
        s = cursor[lane] + gap_and_len % 3
        e = s + gap_and_len // 2
        lanes.append(lane), starts.append(s), ends.append(e)
        cursor[lane] = e
    lane, start, end = (np.array(v, dtype=np.int64) for v in (lanes, starts, ends))
    q_lane = np.array([q[0] for q in queries], dtype=np.int64)
    q_t = np.array([q[1] for q in queries], dtype=np.int64)
    want = [next((i for i in range(len(start)) if lane[i] == ql and start[i] <= t < end[i]), -1)
            for ql, t in zip(q_lane.tolist(), q_t.tolist())]
    assert innermost_enclosing(lane, start, end, q_lane, q_t).tolist() == want


def test_disjoint_intervals_take_the_search_path():
    lane, start, end = np.array([0, 0, 1]), np.array([0, 5, 0]), np.array([5, 9, 3])
    got = _enclosing_disjoint(lane, start, end, np.array([0, 0, 1, 1, 0]), np.array([5, 4, 3, 0, 9]))
    assert got is not None and got.tolist() == [1, 0, -1, 2, -1]
    # nested (overlapping) intervals fall back to the sweep
    assert _enclosing_disjoint(np.array([0, 0]), np.array([0, 1]), np.array([9, 2]), np.array([0]),
                               np.array([1])) is None


def test_an_error_in_the_partition_thread_reaches_the_caller(monkeypatch, tmp_path):
    """analyze() runs the host partition in a second thread: its failure must not be lost."""
    import pytest

    from taxbreak.decompose import analysis
    from taxbreak.synth.bigtrace import write_big_kineto

    path = tmp_path / "t.json.gz"
    write_big_kineto(path, 2000, seed=2)

    def broken(*args):
        raise RuntimeError("partition failed")

    monkeypatch.setattr(analysis, "host_partition", broken)
    with pytest.raises(RuntimeError, match="partition failed"):
        analysis.analyze(path)


def _quantile_by_lexsort(group, values, n, q):
    """The plain definition: lexsort by (group, value), then linear interpolation per group."""
    keep = group >= 0
    g, v = group[keep], np.asarray(values, np.float64)[keep]
    out = np.zeros(n, np.float64)
    order = np.lexsort((v, g))
    g, v = g[order], v[order]
    for k in range(n):
        mine = v[g == k]
        if len(mine):
            pos = (len(mine) - 1) * q
            lo = int(np.floor(pos))
            hi = min(lo + 1, len(mine) - 1)
            out[k] = mine[lo] + (mine[hi] - mine[lo]) * (pos - lo)
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(-1, 4), st.one_of(st.integers(0, 2**40), st.integers(-5, 5),
                                                          st.integers(2**61, 2**63 - 1))), max_size=40),
       st.booleans())
def test_group_quantiles_equal_the_lexsort_definition_per_group(pairs, as_float):
    """One sort for both queue-wait quantiles (the one-key path for non-negative integers, lexsort
    otherwise) gives exactly the per-group interpolation of the sorted values (np.quantile's
    linear method up to its rounding); 0 for an empty group."""
    from taxbreak.decompose.summary import group_quantile, group_quantiles

    group = np.array([g for g, _ in pairs], dtype=np.int64)
    values = np.array([v for _, v in pairs], dtype=np.float64 if as_float else np.int64)
    got = group_quantiles(group, values, 5, (0.5, 0.99))
    for q, res in zip((0.5, 0.99), got):
        want = _quantile_by_lexsort(group, values, 5, q)
        assert res.tolist() == want.tolist()
        assert group_quantile(group, values, 5, q).tolist() == want.tolist()
        small = [g for g in range(5) if (group == g).any() and np.abs(values[group == g]).max() < 2**40]
        for g in small:
            assert np.isclose(res[g], np.quantile(values[group == g].astype(np.float64), q), rtol=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 6).flatmap(lambda n: st.tuples(st.just(n), st.lists(st.integers(-1, n - 1), max_size=30))))
def test_used_only_equals_remove_unused_categories(case):
    """The linked-name categoricals of the kernel table: categories no row uses are dropped,
    the rest keep their order, codes and dtypes as pandas' remove_unused_categories gives."""
    from taxbreak.decompose.components import _used_only

    n_cat, codes = case
    categories = pd.Index([f"aten::op{i}" for i in range(n_cat)], dtype=object)
    codes = np.array(codes, dtype=np.int64)
    want = pd.Series(pd.Categorical.from_codes(codes, categories=categories)).cat.remove_unused_categories()
    got = pd.Series(_used_only(codes, categories))
    pd.testing.assert_series_equal(got, want)
    assert got.cat.codes.dtype == want.cat.codes.dtype
    assert got.cat.categories.dtype == want.cat.categories.dtype
