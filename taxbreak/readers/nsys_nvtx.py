"""NVTX_EVENTS -> ``ranges`` (user ranges) and ``host_events`` (dispatcher ops).

Input columns (by name): ``start``, ``end``, ``eventType``, ``globalTid``,
``text``, ``textId`` (StringIds), ``domainId``, ``category``.

A range's name is ``COALESCE(text, StringIds[textId])``. PyTorch's
``torch.autograd.profiler.emit_nvtx`` pushes one range per RecordFunction, named
by ``getNvtxStr``: ``<name>[, seq = <n>][, op_id = <n>][, sizes = <json>][, input_op_ids = …]``.
The dispatcher ops among them are the ops of the trace and go to ``host_events``
(kind ``op``): every name starting with ``aten::``, and custom ops registered in
another namespace (``flash_attn::_flash_attn_forward, op_id = …``,
``c10d::alltoall_base_, op_id = …``), which Kineto also records as ``cpu_op``.
Every other push/pop or start/end range, including ``record_function`` scopes
(``FSDP::pre_forward (blocks.3…), op_id = …``, ``nccl:all_to_all, op_id = …``),
goes to ``ranges``; so do record_function scopes shaped like an op
(``FSDP::all_gather, op_id = …``, ``profiler::…``: ``trace.names.RECORD_FUNCTION_NAMESPACES``),
which emit_nvtx names exactly like a custom op.

    NVTX_EVENTS row                                         destination
    59, "aten::mm, seq = 46174, op_id = 314290"             host_events op "aten::mm", sequence_nr 46174
    59, "flash_attn::_flash_attn_forward, op_id = 990813"   host_events op "flash_attn::_flash_attn_forward"
    59, "FSDP::pre_forward (blocks.3), op_id = 990878"      ranges nvtx, full text
    59, textId -> "taxbreak/decode/3", domainId 0           ranges nvtx "taxbreak/decode/3", domain null
    59, textId -> "MPI_Send", domainId 1 (75 row "MPI")     ranges nvtx "MPI_Send", domain "MPI"
    34 (mark), 33 (category), 39 (thread), 75 (domain)      diagnostics / TraceMeta, no row
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from taxbreak.trace.diagnostics import Diagnostics
from taxbreak.trace.names import RECORD_FUNCTION_NAMESPACES
from taxbreak.trace.nesting import nesting
from taxbreak.trace.schema import NO_ID

from . import nsys_schema as ns
from .nsys_db import NsysDb, constant_strings, split_global_id, unique_inverse

# Dispatcher ops (RE2, pyarrow): any aten:: name; or namespace::op[.overload]
# followed by emit_nvtx's ", seq = " / ", op_id = " suffix. The suffix keeps
# plain NVTX ranges that happen to contain "::" out, and the name shape (no
# spaces, no parentheses, two colons) keeps record_function scopes out.
OP_PATTERN = r"^(?:aten::|[A-Za-z_]\w*::[A-Za-z_]\w*(?:\.\w+)?, (?:seq|op_id) = )"
# RE2 patterns (pyarrow) over getNvtxStr names; unmatched fields are null.
OP_NAME_PATTERN = r"^(?P<op>[^,]*)"
# At most 18 digits (fits int64): a longer number in a hostile export is no sequence number (NO_ID).
SEQ_PATTERN = r", seq = (?P<seq>-?\d{1,18})(?:[^0-9]|$)"
SIZES_PATTERN = r", sizes = (?P<sizes>\[.*?\])(?:, input_op_ids = |$)"


@dataclass
class NvtxResult:
    """What NVTX_EVENTS yields: two tables and names folded into TraceMeta."""

    host_events: pa.Table
    ranges: pa.Table
    domains: dict[str, str] = field(default_factory=dict)  # domainId -> name
    categories: dict[str, str] = field(default_factory=dict)  # category id -> name
    thread_names: dict[str, str] = field(default_factory=dict)  # "pid:tid" -> name


def read_nvtx(db: NsysDb, diags: Diagnostics) -> NvtxResult:
    """Split NVTX_EVENTS into ops, ranges, metadata records and diagnostics."""
    if not db.has(ns.NVTX):
        diags.add("nsys.missing_table", 1, f"{ns.NVTX} absent (no NVTX trace)")
    # Texts stay Arrow strings from the read to the tables (no Python string per row:
    # at 10 M rows, 5 M op texts, every one distinct because of its op_id).
    c = db.fetch(ns.NVTX, ns.NVTX_COLS, arrow_text=True)
    db.tally.read += len(c["start_ns"])
    types = db.enum_ids(ns.ENUM_EVENT_TYPE, ns.NVTX_TYPE_NAMES)
    names = _range_names(db, c.pop("text"), c["text_id"], diags)
    pid, tid = split_global_id(c["global_tid"])
    c["pid"], c["tid"] = pid, tid
    row_id = db.row_ids(len(pid))
    result = NvtxResult(host_events=pa.table({}), ranges=pa.table({}))
    _fold_metadata(c, names, types, result, db, diags)
    is_range = np.isin(c["event_type"], [types["NvtxPushPopRange"], types["NvtxStartEndRange"]])
    open_ended = is_range & (c["has_end"] == 0)
    diags.add("nsys.empty_range", int(open_ended.sum()), "NVTX range without an end")
    kept = is_range & ~open_ended
    _count_unknown(c, types, is_range, db, diags)
    db.tally.dropped += int(open_ended.sum())
    names = names.filter(pa.array(kept))
    is_op = _is_op(names)
    sub = {k: v[kept] for k, v in c.items()}
    result.host_events = _op_table(sub, row_id[kept], is_op, names, diags)
    result.ranges = _range_table(sub, row_id[kept], ~is_op, names, result.domains, diags)
    return result


def _is_op(names: pa.Array) -> np.ndarray:
    """Ranges that are dispatcher ops: ``OP_PATTERN``, less the record_function scopes whose
    namespace says they are not ops (``FSDP::all_gather, op_id = …``: RECORD_FUNCTION_NAMESPACES)."""
    is_op = pc.fill_null(pc.match_substring_regex(names, OP_PATTERN), False).to_numpy(zero_copy_only=False)
    for prefix in RECORD_FUNCTION_NAMESPACES:
        scope = pc.fill_null(pc.starts_with(names, prefix), False).to_numpy(zero_copy_only=False)
        is_op = is_op & ~scope
    return is_op


def _range_names(db: NsysDb, text: pa.Array, text_id: np.ndarray, diags: Diagnostics) -> pa.Array:
    """``COALESCE(text, StringIds[textId])`` as an Arrow string array."""
    need = text.is_null().to_numpy(zero_copy_only=False) & (text_id >= 0)
    if not need.any():
        return text
    uniq, inverse = unique_inverse(text_id[need])
    looked_up = pa.array(db.strings.lookup(uniq), pa.string()).take(pa.array(inverse.ravel(), pa.int64()))
    position = np.cumsum(need) - 1  # row -> its place among the rows that need a lookup
    from_ids = looked_up.take(pa.array(np.where(need, position, 0), pa.int64()))
    names = pc.if_else(pa.array(need), from_ids, text)
    diags.add("nsys.unresolved_string", int((names.is_null().to_numpy(zero_copy_only=False) & need).sum()),
              "NVTX record whose textId is not in StringIds")
    return names


def _fold_metadata(c: dict, names: pa.Array, types: dict[str, int], result: NvtxResult, db: NsysDb,
                   diags: Diagnostics) -> None:
    """Domain-creation, category and thread-name records name things; they are
    folded into TraceMeta and counted, not turned into rows."""
    folded = 0
    for type_name, key, target in (("NvtxDomainCreate", "domain_id", result.domains),
                                   ("NvtxCategory", "category", result.categories)):
        mask = c["event_type"] == types[type_name]
        target.update({str(k): str(v) for k, v in zip(c[key][mask].tolist(), _texts(names, mask)) if v is not None})
        folded += int(mask.sum())
    mask = c["event_type"] == types["NvtxThread"]
    result.thread_names.update({f"{p}:{t}": str(v) for p, t, v in zip(
        c["pid"][mask].tolist(), c["tid"][mask].tolist(), _texts(names, mask)) if v is not None})
    folded += int(mask.sum())
    diags.add("event.metadata", folded, "NVTX domain-creation, category or thread-name record")
    db.tally.metadata += folded


def _texts(names: pa.Array, mask: np.ndarray) -> list:
    """The names of the (few) masked rows as Python strings."""
    return names.filter(pa.array(mask)).to_pylist() if mask.any() else []


def _count_unknown(c: dict, types: dict[str, int], is_range: np.ndarray, db: NsysDb, diags: Diagnostics) -> None:
    """Marks are instants (no interval to attribute); other types are not modelled."""
    folded_types = [types[t] for t in ("NvtxDomainCreate", "NvtxCategory", "NvtxThread")]
    is_mark = c["event_type"] == types["NvtxMark"]
    other = ~is_range & ~is_mark & ~np.isin(c["event_type"], folded_types)
    diags.add("nsys.empty_range", int(is_mark.sum()), "NVTX mark (an instant, no end)")
    if other.any():
        diags.add("event.unknown_category", int(other.sum()),
                  f"NVTX eventType {int(c['event_type'][other][0])} not modelled")
    db.tally.dropped += int(is_mark.sum() + other.sum())


def _op_table(c: dict, row_id: np.ndarray, mask: np.ndarray, names: pa.Array, diags: Diagnostics) -> pa.Table:
    op_names = names.filter(pa.array(mask))
    op = _extract(op_names, OP_NAME_PATTERN, "op")
    seq_nr = pc.fill_null(_extract(op_names, SEQ_PATTERN, "seq").cast(pa.int64()), NO_ID)
    sizes = _extract(op_names, SIZES_PATTERN, "sizes")
    n = int(mask.sum())
    start, dur = c["start_ns"][mask], _durations(c, mask, diags)
    depth, parent_idx = nesting(_lanes(c, mask), start, dur)
    rows = row_id[mask]
    none = np.full(n, NO_ID, dtype=np.int64)
    return pa.table({
        "row_id": rows, "pid": c["pid"][mask], "tid": c["tid"][mask],
        "kind": constant_strings(n, "op"),
        "name": op, "start_ns": start, "dur_ns": dur, "depth": depth,
        "parent": np.where(parent_idx >= 0, rows[np.maximum(parent_idx, 0)], NO_ID),
        "external_id": none, "python_id": none, "python_parent_id": none, "sequence_nr": seq_nr,
        "input_dims": sizes,
        "input_types": pa.nulls(n, pa.string()), "input_strides": pa.nulls(n, pa.string()),
        "concrete_inputs": pa.nulls(n, pa.string()),
    })


def _range_table(c: dict, row_id: np.ndarray, mask: np.ndarray, names: pa.Array, domains: dict[str, str],
                 diags: Diagnostics) -> pa.Table:
    n = int(mask.sum())
    start, dur = c["start_ns"][mask], _durations(c, mask, diags)
    depth, _ = nesting(_lanes(c, mask), start, dur)
    domain_ids, inverse = unique_inverse(c["domain_id"][mask])
    domain_names = np.array([domains.get(str(d)) for d in domain_ids.tolist()], dtype=object)
    return pa.table({
        "row_id": row_id[mask],
        "source": constant_strings(n, "nvtx"),
        "name": names.filter(pa.array(mask)), "pid": c["pid"][mask], "tid": c["tid"][mask],
        "start_ns": start, "dur_ns": dur, "depth": depth, "external_id": np.full(n, NO_ID, dtype=np.int64),
        "domain": pa.array(domain_names, pa.string()).take(pa.array(inverse.ravel(), pa.int64())),
    })


def _extract(names: pa.Array, pattern: str, group: str) -> pa.Array:
    """One named group of ``pattern`` per name (null where it does not match)."""
    return pc.struct_field(pc.extract_regex(names, pattern), group)


def _durations(c: dict, mask: np.ndarray, diags: Diagnostics) -> np.ndarray:
    dur = c["end_ns"][mask] - c["start_ns"][mask]
    diags.add("event.negative_dur", int((dur < 0).sum()), "NVTX range with end < start; duration clamped to 0")
    return np.maximum(dur, 0)


def _lanes(c: dict, mask: np.ndarray) -> np.ndarray:
    """One int64 per (pid, tid): both fit in 24 bits."""
    return (c["pid"][mask] << ns.ID_BITS) | (c["tid"][mask] & ns.ID_MASK)
