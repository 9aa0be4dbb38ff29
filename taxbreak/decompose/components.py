"""Per-kernel TaxBreak components (ΔFT, ΔCT, ΔKT) from the linked chain.

Per kernel k (docs/method.md gives sources and deviations):

    T_py       = start(root ATen op) − max(start(torch op), end(previous root ATen op))
    T_dispatch = start(launch) − start(ATen op)            first launch of the op invocation
               = start(launch) − end(previous launch)       later launches of the same invocation
    T_launch   = start(kernel) − start(launch)
    ΔFT_k = T_py + (I_lib ? T_dispatch_base : T_dispatch)
    ΔCT_k = I_lib · max(0, T_dispatch − T_dispatch_base)
    ΔKT_k = T_sys + launch_latency (+ a graph call's host time beyond T_sys)
    T_launch = t_floor + queue_wait + launch_latency     (launch_split.py)

T_py is paid once per ATen op invocation: its first launch carries it, later
launches of the same invocation carry 0 (the authors count it per kernel,
which counts one op's Python time once per kernel). Host components belong
to the launch call: in a CUDA-graph replay the first
device activity of the launch carries them and the others carry 0. Memcpy and
memset rows keep their links but have no components (NA).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..trace.diagnostics import Diagnostics
from .classify import CLASS_NAMES, EVIDENCE, kernel_class, name_is_framework, name_is_library, op_verdict
from .dependency import learned_bounds, split_dependency, wait_summary, waited_on
from .floor import Floor
from .health import idle_launch_lag_ns
from .launch_split import previous_end, split_launch
from .link import NONE, Links
from .op_chain import Chain
from .views import Views

DISPATCH_BASE_MIN_NS = 100  # authors keep T_dispatch > 0.1 µs for the median (paper Eq.5)


def first_of_launch(dev_api: np.ndarray, start_ns: np.ndarray) -> np.ndarray:
    """True for the earliest device activity of each launch call (and for orphans)."""
    first = np.ones(len(dev_api), dtype=bool)
    linked = np.flatnonzero(dev_api >= 0)
    order = linked[np.lexsort((start_ns[linked], dev_api[linked]))]
    dup = np.zeros(len(order), dtype=bool)
    dup[1:] = dev_api[order][1:] == dev_api[order][:-1]
    first[order[dup]] = False
    return first


def library_flags(views: Views, links: Links, op: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """I_lib per device activity and the evidence that decided it (codes into ``EVIDENCE``):
    library API ranges, else the launching op, else the kernel's own name (classify.py)."""
    dev, host = views.device, views.host
    a = links.dev_api
    is_lib = name_is_library(dev.names)
    evidence = np.full(len(a), EVIDENCE.index("name"), np.int8)
    verdict = _take(op_verdict(host.name_cats)[host.name_codes], op, -1) if len(host.name_codes) else \
        np.full(len(a), -1, np.int8)
    framework = name_is_framework(dev.names)
    by_op = (verdict == 0) | ((verdict == 1) & ~framework)
    is_lib = np.where(by_op, verdict == 1, is_lib)
    evidence[by_op] = EVIDENCE.index("op")
    if links.has_library_ranges:
        linked = a >= 0
        in_range = np.zeros(len(a), dtype=bool)
        in_range[linked] = links.api_library[a[linked]] >= 0
        is_lib = np.where(linked, in_range, is_lib)
        evidence[linked] = EVIDENCE.index("range")
    return is_lib, evidence


def dispatch_base_ns(t_dispatch: np.ndarray, is_kernel: np.ndarray, is_lib: np.ndarray) -> int | None:
    """T_dispatch_base = median T_dispatch over non-library kernels with T_dispatch > 0.1 µs."""
    sample = t_dispatch[is_kernel & ~is_lib & (t_dispatch > DISPATCH_BASE_MIN_NS)]
    return int(round(float(np.median(sample)))) if len(sample) else None


def _take(values: np.ndarray, idx: np.ndarray, fill=NONE) -> np.ndarray:
    """``values[idx]`` where ``idx >= 0``, else ``fill`` (works when ``values`` is empty)."""
    valid = idx >= 0
    if len(values) == 0:
        return np.full(len(idx), fill, dtype=values.dtype if fill is not None else object)
    out = values[np.where(valid, idx, 0)]
    return np.where(valid, out, fill)


def _own(values: np.ndarray) -> np.ndarray:
    """``values`` itself when it is a writeable array of its own, else a copy: a frame built
    without copying must not hold a read-only view of an Arrow buffer, which a caller's
    ``kernels.loc[...] = ...`` could not write."""
    if isinstance(values, np.ndarray) and values.flags.writeable and values.flags.owndata:
        return values
    return np.array(values)


def _na(values: np.ndarray, valid: np.ndarray) -> pd.Series:
    """Nullable Int64 column: NA where not ``valid`` (a missing link is never 0)."""
    # values and mask straight into the nullable array (no second pass to blank the invalid rows)
    return pd.Series(pd.arrays.IntegerArray(np.where(valid, values, 0).astype(np.int64), ~np.asarray(valid, bool)))


def _str(codes: np.ndarray, cats: np.ndarray, idx: np.ndarray) -> pd.Series:
    """Names of the linked rows as a categorical (NaN where there is no link)."""
    taken = _take(codes, idx, -1) if len(codes) else np.full(len(idx), -1, dtype=np.int64)
    categories = (pd.Index(pd.unique(cats), dtype=object) if len(pd.unique(cats)) == len(cats)
                  else pd.Index(cats, dtype=object))
    return pd.Series(_used_only(taken, categories))


def _used_only(codes: np.ndarray, categories: pd.Index) -> pd.Categorical:
    """``Categorical.from_codes(codes, categories).remove_unused_categories()``, the unused
    categories found by one bincount instead of pandas' unique over the codes (5 M kernels:
    0.68 s for the three name columns)."""
    codes = np.asarray(codes, np.int64)
    used = np.bincount(codes[codes >= 0], minlength=len(categories)) > 0
    new_code = np.cumsum(used) - 1  # old code -> its place among the used categories
    kept = np.where(codes >= 0, new_code[np.maximum(codes, 0)], -1) if len(categories) else codes
    return pd.Categorical.from_codes(kept, categories=categories[used])


def text_column(codes: np.ndarray, values) -> pd.Series:
    """A plain string column from codes into a few distinct ``values``, built in Arrow.

    The same column as ``pd.Series(values[codes])`` (pandas' default string
    dtype), without a Python object per row: at 1.65 M kernels pandas took
    0.27 s per column to infer it from objects, Arrow 0.09 s.
    """
    if len(codes) == 0:  # no rows: pandas keeps an empty object column as it is
        return pd.Series(np.zeros(0, dtype=object))
    dictionary = pa.DictionaryArray.from_arrays(pa.array(np.asarray(codes, np.int32)),
                                                pa.array(list(values), pa.string()))
    return dictionary.cast(pa.string()).to_pandas()


def _name_categorical(names: pa.ChunkedArray) -> pd.Series:
    """Kernel names as a categorical with sorted categories (NaN for a null name).

    Built from the Arrow dictionary codes: only the distinct names become
    Python strings, never one object per kernel.
    """
    if len(names) == 0:
        return pd.Series([], dtype="category")
    encoded = pc.dictionary_encode(names)
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    distinct = pd.Series(encoded.dictionary.to_pandas(), dtype="category")
    codes = np.asarray(pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False), np.int64)
    sorted_codes = distinct.cat.codes.to_numpy(np.int64)
    full = np.where(codes >= 0, sorted_codes[np.maximum(codes, 0)], -1) if len(sorted_codes) else codes
    return pd.Series(pd.Categorical.from_codes(full, dtype=distinct.dtype))


def build_kernels(views: Views, links: Links, floor: Floor, diags: Diagnostics, chain: Chain) -> pd.DataFrame:
    """The per-kernel chain table with every component (columns in docs/method.md);
    ``chain`` is :func:`op_chain.op_chain` of the same views and links."""
    api, host, dev = views.api, views.host, views.device
    a = links.dev_api
    op = _take(links.api_op, a)
    torch = _take(links.op_torch, op)
    launch_start = _take(api.start_ns, a)
    t_dispatch = _take(chain.t_dispatch_ns, a)
    first_in_op = _take(chain.first_in_root, a, False).astype(bool)
    root = _take(links.op_root, op)
    origin = _take(links.py_origin_ns, root)
    t_py = np.where(origin >= 0, _take(host.start_ns, root) - origin, NONE)
    t_launch = np.where(a >= 0, dev.start_ns - launch_start, NONE)
    diags.add("decompose.negative_interval", int(((a >= 0) & (t_launch < 0)).sum()), "T_launch < 0 (clock skew)")
    is_lib, evidence = library_flags(views, links, op)
    is_kernel = dev.kind == "kernel"
    first = first_of_launch(a, dev.start_ns)
    base = dispatch_base_ns(np.where(is_kernel & first, t_dispatch, NONE), is_kernel, is_lib)
    df = pd.DataFrame({
        "correlation": _own(dev.correlation),
        "name": _name_categorical(dev.names),
        "kind": text_column(dev.kind_codes, dev.kind_cats),
        "device": _own(dev.device),
        "stream": _own(dev.stream),
        "start_ns": _own(dev.start_ns),
        "dur_ns": dev.end_ns - dev.start_ns,
        "launch_name": _str(api.name_codes, api.name_cats, a),
        "launch_start_ns": _na(launch_start, a >= 0),
        "launch_dur_ns": _na(_take(api.end_ns, a) - launch_start, a >= 0),
        "launch_pid": _na(_take(api.pid, a), a >= 0),
        "launch_tid": _na(_take(api.tid, a), a >= 0),
        "op_name": _str(host.name_codes, host.name_cats, op),
        "op_start_ns": _na(_take(host.start_ns, op), op >= 0),
        "torch_op_name": _str(host.name_codes, host.name_cats, torch),
        "t_py_ns": _na(t_py, t_py >= 0),
        "t_dispatch_ns": _na(t_dispatch, t_dispatch >= 0),
        "t_launch_ns": _na(t_launch, a >= 0),
        "is_library": is_lib,
        "library_evidence": text_column(evidence, EVIDENCE),
        "kernel_class": text_column(kernel_class(dev.names, dev.kind, is_lib), CLASS_NAMES),
        "first_of_launch": first,
        "first_in_op": first_in_op,
    }, copy=False)  # every column is built here or owned (5 M kernels: 1.5 s of copies and block stacking)
    df.attrs["t_dispatch_base_ns"] = base
    is_graph = _take(api.kind_is("graph_launch"), a, False).astype(bool)
    _add_components(df, base, floor, is_graph)
    # ΔCT that rests on the kernel name alone is an estimate: summed apart (library_by_name_us)
    by_name = pd.Series(evidence == EVIDENCE.index("name"), index=df.index)
    df["ct_by_name_ns"] = df["ct_ns"].where(by_name | df["ct_ns"].isna(), 0)
    # the end of each activity's device's earlier work: read by the launch split and the dependency wait
    device_prev = previous_end(np.asarray(dev.device, np.int64), dev.start_ns, dev.end_ns)
    _add_launch_split(df, dev, floor, diags, device_prev)
    _add_dependency_wait(df, views, a, floor, device_prev)
    return df


def _add_launch_split(df: pd.DataFrame, dev, floor: Floor, diags: Diagnostics, device_prev: np.ndarray) -> None:
    """Per-kernel ``t_floor_ns``, ``queue_wait_ns``, ``launch_latency_ns`` (they sum to T_launch)."""
    linked = ((df["kind"] == "kernel") & df["launch_start_ns"].notna()).to_numpy(bool)
    carrier = linked & df["first_of_launch"].to_numpy(bool)
    launch_start = df["launch_start_ns"].to_numpy(np.int64, na_value=0)
    split = split_launch(dev.start_ns, launch_start, linked, carrier, device_prev, floor.floor_ns)
    valid = split.queue_wait_ns >= 0
    df["t_floor_ns"] = _na(split.t_floor_ns, valid)
    df["queue_wait_ns"] = _na(split.queue_wait_ns, valid)
    df["launch_latency_ns"] = _na(split.launch_latency_ns, valid)
    df["queue_start_ns"] = _na(split.queue_start_ns, split.queue_start_ns >= 0)
    if floor.floor_ns is not None:
        below = carrier & (df["t_launch_ns"].to_numpy(np.int64, na_value=0) < floor.floor_ns)
        diags.add("decompose.below_floor", int(below.sum()),
                  "T_launch shorter than T_sys: the split's floor part is T_launch itself")


def _add_dependency_wait(df: pd.DataFrame, views: Views, dev_api: np.ndarray, floor: Floor,
                         device_prev: np.ndarray) -> None:
    """Move launch latency beyond the trace's learned bound into ``dependency_wait_ns`` (dependency.py);
    the bounds and the calls waited on go to ``df.attrs``."""
    dev = views.device
    latency = df["launch_latency_ns"].to_numpy(np.int64, na_value=0)
    launch_start = df["launch_start_ns"].to_numpy(np.int64, na_value=0)
    t_launch = df["t_launch_ns"].to_numpy(np.int64, na_value=0)
    carrier = ((df["kind"] == "kernel") & df["first_of_launch"] & df["launch_start_ns"].notna()).to_numpy(bool)
    device = np.asarray(dev.device, np.int64)
    idle_at_launch = device_prev <= launch_start
    sample = carrier & idle_at_launch & (t_launch >= 0) & df["launch_latency_ns"].notna().to_numpy(bool)
    bounds = learned_bounds(device, t_launch, sample, floor.floor_ns) if floor.floor_ns is not None else {}
    known = {d: b for d, b in bounds.items() if b is not None}
    row_bound = pd.Series(device).map(known).fillna(-1).to_numpy(np.int64)
    row_bound = np.where(carrier, row_bound, -1)
    launch_end = launch_start + df["launch_dur_ns"].to_numpy(np.int64, na_value=0)
    wait = split_dependency(latency, dev.start_ns, launch_start, launch_end, row_bound)
    valid = df["launch_latency_ns"].notna().to_numpy(bool)
    df["launch_latency_ns"] = _na(latency - wait, valid)
    df["dependency_wait_ns"] = _na(wait, valid)
    rows = np.flatnonzero(wait > 0)
    lane = views.api.lane[dev_api[rows]]
    names = waited_on(views, lane, launch_start[rows], dev.start_ns[rows] - wait[rows] // 2)
    lag = idle_launch_lag_ns(df, idle_at_launch)  # before the attrs: every column read deep-copies them
    df.attrs["launch_latency_bound_us"] = {str(d): None if b is None else b / 1e3 for d, b in bounds.items()} or None
    df.attrs["dependency_waits"] = wait_summary(names, wait[rows])
    df.attrs["idle_launch_lag_ns"] = lag


def _add_components(df: pd.DataFrame, base: int | None, floor: Floor, is_graph: np.ndarray) -> None:
    """ΔFT (python + dispatch parts), ΔCT, ΔKT floor and graph-call parts per kernel, in ns.

    Without a dispatch baseline ΔCT is not measurable: NA for every kernel
    (docs/method.md §2), never 0."""
    eligible = (df["kind"] == "kernel") & df["launch_start_ns"].notna()
    carrier = eligible & df["first_of_launch"]
    graph_rest = eligible & ~df["first_of_launch"]
    lib = df["is_library"]
    t_disp = df["t_dispatch_ns"]
    # T_py is paid once per op invocation: later launches of the same op carry 0
    ft_py = df["t_py_ns"].where(df["first_in_op"] | df["t_py_ns"].isna(), 0).where(carrier)
    if base is None:
        # no non-library kernel to take the baseline from: ΔCT is not measurable
        ft_disp = t_disp.where(carrier)
        ct = pd.Series(pd.NA, index=df.index, dtype="Int64")
    else:
        # a library kernel's ΔFT dispatch is the baseline only up to what was measured: with
        # T_dispatch < T_dispatch_base the paper's formula would add host time that never happened
        ft_disp = t_disp.where(~lib, t_disp.clip(upper=base)).where(carrier & t_disp.notna())
        ct = (t_disp - base).clip(lower=0).where(lib, 0).where(carrier)
    df["ft_python_ns"] = _zero_rest(ft_py, graph_rest)
    df["ft_dispatch_ns"] = _zero_rest(ft_disp, graph_rest)
    both_na = df["ft_python_ns"].isna() & df["ft_dispatch_ns"].isna()
    df["ft_ns"] = (df["ft_python_ns"].fillna(0) + df["ft_dispatch_ns"].fillna(0)).where(~both_na)
    df["ct_ns"] = _zero_rest(ct, graph_rest)
    if floor.floor_ns is None:
        na = pd.Series(pd.array([pd.NA] * len(df), dtype="Int64"), index=df.index)
        df["kt_floor_ns"], df["kt_graph_ns"] = na, na.copy()
    else:
        floor_ns = pd.Series(floor.floor_ns, index=df.index, dtype="Int64").where(carrier)
        df["kt_floor_ns"] = _zero_rest(floor_ns, graph_rest)
        # a graph launch call can take ms on the host (one T_sys would hide it): the rest is launch path too
        graph_call = (df["launch_dur_ns"] - floor.floor_ns).clip(lower=0).where(pd.Series(is_graph, index=df.index), 0)
        df["kt_graph_ns"] = _zero_rest(graph_call.where(carrier), graph_rest)


def _zero_rest(values: pd.Series, graph_rest: pd.Series) -> pd.Series:
    """0 (not NA) for the non-first kernels of a graph replay: they had no host cost of their own."""
    return values.astype("Int64").mask(graph_rest, 0)
