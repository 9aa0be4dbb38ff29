"""Numpy views of the canonical tables, with one dense lane id per host thread.

The decomposer works on plain numpy arrays; this module converts the Arrow
tables once (strings stay Arrow arrays until a DataFrame needs them).
"""
from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..trace.names import RECORD_FUNCTION_NAMESPACES
from ..trace.tables import TraceTables
from .intervals import dense_pairs

LINKABLE_API_KINDS = ("launch", "graph_launch", "memcpy", "memset")
LAUNCH_API_KINDS = ("launch", "graph_launch")
DEVICE_WORK_KINDS = ("kernel", "memcpy", "memset")
# Ops that go through the dispatcher: every aten:: op, and custom ops registered as namespace::op[.overload]
# (vllm::moe_forward, _C::fused_add_rms_norm, sgl_kernel::silu_and_mul, aiter::rmsnorm). The name shape
# (one "::", no spaces or parentheses) keeps torch-level events such as
# "autograd::engine::evaluate_function: MmBackward0" or "torch::autograd::AccumulateGrad" out; the Nsight
# reader applies the same shape to emit_nvtx ranges (readers/nsys_nvtx.py OP_PATTERN).
DISPATCHER_OP = re.compile(r"^(?:aten::.+|[A-Za-z_]\w*::[A-Za-z_]\w*(?:\.\w+)?)$")
# record_function scopes shaped like an op (profiler bookkeeping, FSDP::pre_forward …), not dispatch work
NOT_DISPATCHER_NAMESPACES = RECORD_FUNCTION_NAMESPACES


def is_dispatcher_op(name: str) -> bool:
    """True for an ATen or custom dispatcher op name (see ``DISPATCHER_OP``)."""
    return name.startswith("aten::") or (DISPATCHER_OP.match(name) is not None
                                         and not name.startswith(NOT_DISPATCHER_NAMESPACES))


def _ints(table: pa.Table, column: str) -> np.ndarray:
    return np.asarray(table.column(column).to_numpy(), dtype=np.int64)


def _codes(table: pa.Table, column: str) -> tuple[np.ndarray, np.ndarray]:
    """Dictionary codes (int64) and distinct values (object array) of a string column (nulls as "").

    Nulls are filled on the codes, not on the strings: filling the column
    first would copy every string (108 MB of host names at 10 M events).
    """
    col = pc.dictionary_encode(table.column(column))  # canonical text is a dictionary already: kept as is
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if len(col) == 0 or col.dictionary is None:
        return np.zeros(0, np.int64), np.zeros(0, dtype=object)
    cats = np.asarray(pc.fill_null(col.dictionary.cast(pa.string()), "").to_numpy(zero_copy_only=False), dtype=object)
    if col.null_count == 0:
        return np.asarray(col.indices.to_numpy(zero_copy_only=False), np.int64), cats
    blank = np.flatnonzero(cats == "")
    if not len(blank):  # a null with no "" among the values: "" becomes one more value
        blank, cats = np.array([len(cats)]), np.append(cats, np.array([""], dtype=object))
    return np.asarray(pc.fill_null(col.indices, int(blank[0])).to_numpy(zero_copy_only=False), np.int64), cats


def _strs(table: pa.Table, column: str) -> np.ndarray:
    """Object array of a string or dictionary column (nulls as "")."""
    codes, cats = _codes(table, column)
    return cats[codes] if len(codes) else np.zeros(0, dtype=object)


def name_flags(names: np.ndarray, pattern: re.Pattern) -> np.ndarray:
    """``pattern`` searched in each distinct name (an object array): one bool per name."""
    return np.fromiter((pattern.search(str(name)) is not None for name in names), dtype=bool, count=len(names))


class _KindLookup:
    """``kind_is`` and ``named`` for views that carry the dictionary codes of ``kind`` and ``name``."""

    kind_codes: np.ndarray
    kind_cats: np.ndarray
    name_codes: np.ndarray
    name_cats: np.ndarray

    def named(self, pattern: re.Pattern) -> np.ndarray:
        """``pattern`` found in the row's name, decided once per distinct name and spread by codes."""
        if len(self.name_codes) == 0:
            return np.zeros(0, dtype=bool)
        return name_flags(self.name_cats, pattern)[self.name_codes]

    def names(self, rows: np.ndarray) -> np.ndarray:
        """The names of ``rows`` (object array)."""
        return self.name_cats[self.name_codes[rows]] if len(rows) else np.zeros(0, dtype=object)

    def kind_is(self, *kinds: str) -> np.ndarray:
        """``kind in kinds`` per row, decided once per distinct kind and spread by codes."""
        if len(self.kind_codes) == 0:
            return np.zeros(0, dtype=bool)
        return np.isin(self.kind_cats, kinds)[self.kind_codes]


@dataclass
class Host(_KindLookup):
    """Host events (python frames, ops, annotations).

    Names and kinds are held as dictionary codes only: an object array per
    column would cost 8 bytes a row (27 MB each at 10 M events) for what
    ``name_cats[name_codes]`` gives on the rows that need it.
    """

    lane: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    external_id: np.ndarray
    is_aten: np.ndarray  # kind op and a dispatcher op name: aten::… or a custom namespace::op (DISPATCHER_OP)
    name_codes: np.ndarray  # name = name_cats[name_codes]
    name_cats: np.ndarray
    kind_codes: np.ndarray  # kind = kind_cats[kind_codes]
    kind_cats: np.ndarray


@dataclass
class Api(_KindLookup):
    """Runtime/driver/library API calls."""

    lane: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    process: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    correlation: np.ndarray
    external_id: np.ndarray
    name_codes: np.ndarray
    name_cats: np.ndarray
    kind_codes: np.ndarray
    kind_cats: np.ndarray


@dataclass
class Device:
    """Device work (kernels, memcpy, memset); ``sync`` rows are not work."""

    row: np.ndarray  # index into tables.device_activities
    process: np.ndarray
    kind: np.ndarray
    names: pa.ChunkedArray  # dictionary-encoded
    device: np.ndarray
    stream: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    correlation: np.ndarray
    kind_codes: np.ndarray  # kind = kind_cats[kind_codes]
    kind_cats: np.ndarray


@dataclass
class Views:
    host: Host
    api: Api
    device: Device
    n_lanes: int
    lane_pid: np.ndarray
    lane_tid: np.ndarray


def _host_with_nvtx(tables: TraceTables) -> pa.Table:
    """Host events, plus host NVTX ranges as annotations when the trace has no annotation events.

    Nsight traces carry ``record_function``/user ranges only as NVTX (the reader
    puts ``aten::`` ranges in ``host_events`` and the rest in ``ranges``); they
    play the role of Kineto ``user_annotation`` events. A Kineto trace that has
    annotations keeps only those (its NVTX mirror would count twice).
    """
    he, r = tables.host_events, tables.ranges
    if r.num_rows == 0 or pc.any(pc.equal(he.column("kind"), "annotation")).as_py():
        return he
    nvtx = r.filter(pc.equal(r.column("source").cast(pa.string()), "nvtx"))
    if nvtx.num_rows == 0:
        return he
    n = nvtx.num_rows
    minus = pa.array(np.full(n, -1, np.int64))
    extra = pa.table({
        "pid": nvtx.column("pid"), "tid": nvtx.column("tid"),
        "kind": pa.array(["annotation"] * n, pa.string()), "name": nvtx.column("name"),
        "start_ns": nvtx.column("start_ns"), "dur_ns": nvtx.column("dur_ns"), "external_id": minus,
    })
    cols = ["pid", "tid", "kind", "name", "start_ns", "dur_ns", "external_id"]
    base = pa.table({c: he.column(c).cast(extra.schema.field(c).type) for c in cols})
    return pa.concat_tables([base, extra])


def build_views(tables: TraceTables) -> Views:
    """Numpy views of ``tables`` with lanes shared by host events and API calls.

    The device view is built in a second thread while this one assigns lanes;
    Arrow and numpy release the GIL for both.
    """
    he, ac = _host_with_nvtx(tables), tables.api_calls
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="taxbreak-views") as pool:
        device_job = pool.submit(_device, tables.device_activities)
        host, api, lane_pid, lane_tid = _host_and_api(he, ac)
        return Views(host, api, device_job.result(), len(lane_pid), lane_pid, lane_tid)


def _host_and_api(he: pa.Table, ac: pa.Table) -> tuple[Host, Api, np.ndarray, np.ndarray]:
    """The host and API views, and the (pid, tid) of each lane they share."""
    lane, lane_pid, lane_tid = dense_pairs(np.concatenate([_ints(he, "pid"), _ints(ac, "pid")]),
                                           np.concatenate([_ints(he, "tid"), _ints(ac, "tid")]))
    n_he = he.num_rows
    k_codes, k_cats = _codes(he, "kind")
    is_op = np.isin(k_cats, ("op",))[k_codes] if n_he else np.zeros(0, dtype=bool)
    h_codes, h_cats = _codes(he, "name")
    # decided once per distinct name, like the kinds
    aten_name = np.fromiter((is_dispatcher_op(name) for name in h_cats), dtype=bool, count=len(h_cats))
    is_aten = is_op & aten_name[h_codes] if n_he else np.zeros(0, dtype=bool)
    start = _ints(he, "start_ns")
    host = Host(lane[:n_he], start, start + _ints(he, "dur_ns"), _ints(he, "external_id"), is_aten,
                h_codes, h_cats, k_codes, k_cats)
    a_codes, a_cats = _codes(ac, "name")
    ak_codes, ak_cats = _codes(ac, "kind")
    start = _ints(ac, "start_ns")
    api = Api(lane[n_he:], _ints(ac, "pid"), _ints(ac, "tid"), _ints(ac, "process"), start,
              start + _ints(ac, "dur_ns"), _ints(ac, "correlation"), _ints(ac, "external_id"),
              a_codes, a_cats, ak_codes, ak_cats)
    return host, api, lane_pid, lane_tid


def used_names_only(names: pa.ChunkedArray) -> pa.DictionaryArray:
    """``names`` (dictionary-encoded) with only the dictionary entries some row uses, still
    encoded: cast to plain strings, one 700 KB name shared by thousands of rows would be
    copied once per row (past Arrow's 2 GB string capacity)."""
    arr = names.combine_chunks()
    if not pa.types.is_dictionary(arr.type):
        return pc.dictionary_encode(arr)
    codes = pc.fill_null(arr.indices, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    valid = arr.indices.is_valid().to_numpy(zero_copy_only=False)
    used = np.unique(codes[valid])
    remap = np.zeros(len(arr.dictionary), np.int32)
    remap[used] = np.arange(len(used), dtype=np.int32)
    indices = pa.array(remap[codes], type=pa.int32(), mask=~valid if not valid.all() else None)
    return pa.DictionaryArray.from_arrays(indices, arr.dictionary.take(pa.array(used, pa.int64())))


def _device(da: pa.Table) -> Device:
    codes, cats = _codes(da, "kind")
    work = np.isin(cats, DEVICE_WORK_KINDS)[codes] if len(codes) else np.zeros(0, dtype=bool)
    row = np.flatnonzero(work)
    every_row = len(row) == da.num_rows  # most traces have no sync rows: no copies then

    def column(name: str) -> np.ndarray:
        values = _ints(da, name)
        return values if every_row else values[row]

    kind = cats[codes[row]] if len(row) else np.zeros(0, dtype=object)
    # kernel names as dictionary codes: every later per-name step works on distinct names
    names = da.column("name")
    if not every_row:  # the rows kept, their names only: a sync row's name is no kernel name
        names = pa.chunked_array([used_names_only(names.take(pa.array(row)))])
    names = pa.chunked_array([pc.dictionary_encode(names).combine_chunks()])
    start = column("start_ns")
    return Device(row, column("process"), kind, names, column("device"), column("stream"), start,
                  start + column("dur_ns"), column("correlation"), codes[row], cats)
