"""The canonical trace model: one Arrow schema per table.

Every reader produces exactly these tables; every analysis reads only these
columns. Conventions (documented in docs/trace-model.md):

* Times are int64 nanoseconds on one clock whose zero is the trace's own
  origin (``TraceMeta.origin_ns`` keeps the absolute value). Names carry the
  unit: ``start_ns``, ``dur_ns``.
* Missing integer ids are ``-1`` (not null), so that columns stay plain int64
  numpy arrays and joins/searchsorted need no masking.
* ``row_id`` is unique across *all* tables of one trace: it is the index of
  the source event (Kineto: position in ``traceEvents``; Nsight: a running
  number assigned per table), so any derived row can be traced back.
* ``process`` is the correlation namespace. CUPTI correlation ids are unique
  only per process: Nsight exports set it to the host process id (from
  ``globalPid``/``globalTid``); Kineto files hold one namespace and set 0.
* Text (kinds, names, API names, recorded shapes, flow categories) is
  ``dictionary<int32, string>`` with one dictionary per column; a missing
  value is null. Convert with ``.cast(pa.string())`` where plain text is needed
  (``pc.starts_with`` and other string kernels do not take dictionaries).
"""
from __future__ import annotations

import pyarrow as pa

# Categorical vocabularies. Readers must map into these values only.
HOST_KINDS = ("python", "op", "annotation")
API_KINDS = ("launch", "graph_launch", "memcpy", "memset", "sync", "library", "other")
API_DOMAINS = ("cuda_runtime", "cuda_driver", "hip_runtime", "cublas", "cudnn")
DEVICE_KINDS = ("kernel", "memcpy", "memset", "sync")
RANGE_SOURCES = ("nvtx", "gpu_annotation")

NO_ID = -1

_DICT = pa.dictionary(pa.int32(), pa.string())
# Names, API names and recorded shapes repeat: dictionary-encoded, one dictionary per
# column, they take 112 MB instead of 564 MB in the tables of a 10 M-event trace.
TEXT = _DICT
_I64 = pa.int64()
_I32 = pa.int32()

HOST_EVENTS = pa.schema(
    [
        ("row_id", _I64),
        ("pid", _I64),
        ("tid", _I64),
        ("kind", _DICT),  # one of HOST_KINDS
        ("name", TEXT),
        ("start_ns", _I64),
        ("dur_ns", _I64),
        ("depth", _I32),  # nesting depth on (pid, tid); 0 = outermost
        ("parent", _I64),  # row_id of the innermost enclosing host event, or -1
        ("external_id", _I64),  # Kineto "External id", or -1
        ("python_id", _I64),  # Kineto "Python id", or -1
        ("python_parent_id", _I64),  # Kineto "Python parent id", or -1
        ("sequence_nr", _I64),  # autograd "Sequence number", or -1
        ("input_dims", TEXT),  # JSON text of "Input Dims" (record_shapes), or null
        ("input_types", TEXT),  # JSON text of "Input type", or null
        ("input_strides", TEXT),  # JSON text of "Input Strides", or null
        ("concrete_inputs", TEXT),  # JSON text of "Concrete Inputs", or null
    ]
)

API_CALLS = pa.schema(
    [
        ("row_id", _I64),
        ("process", _I64),  # correlation namespace (see module doc)
        ("pid", _I64),
        ("tid", _I64),
        ("domain", _DICT),  # one of API_DOMAINS
        ("kind", _DICT),  # one of API_KINDS
        ("name", TEXT),  # as written in the trace
        ("api_name", TEXT),  # normalized: version suffix like _v7000 stripped
        ("start_ns", _I64),
        ("dur_ns", _I64),
        ("correlation", _I64),  # CUPTI correlation id, or -1 (library ranges)
        ("external_id", _I64),  # Kineto "External id" of the enclosing op, or -1
        ("cbid", _I64),  # CUPTI callback id, or -1
    ]
)

DEVICE_ACTIVITIES = pa.schema(
    [
        ("row_id", _I64),
        ("process", _I64),  # correlation namespace (see module doc)
        ("kind", _DICT),  # one of DEVICE_KINDS
        ("name", TEXT),
        ("device", _I64),
        ("stream", _I64),
        ("context", _I64),
        ("start_ns", _I64),
        ("dur_ns", _I64),
        ("correlation", _I64),
        ("external_id", _I64),
        ("grid_x", _I64),
        ("grid_y", _I64),
        ("grid_z", _I64),
        ("block_x", _I64),
        ("block_y", _I64),
        ("block_z", _I64),
        ("registers", _I64),  # registers per thread, or -1
        ("shared_mem_bytes", _I64),  # static + dynamic shared memory, or -1
        ("bytes", _I64),  # memcpy/memset size, or -1
        ("graph_id", _I64),  # CUDA graph id, or -1
        ("graph_node_id", _I64),  # CUDA graph node id, or -1
    ]
)

RANGES = pa.schema(
    [
        ("row_id", _I64),
        ("source", _DICT),  # one of RANGE_SOURCES
        ("name", TEXT),
        ("pid", _I64),  # host pid (nvtx) or device id (gpu_annotation)
        ("tid", _I64),  # host tid (nvtx) or stream (gpu_annotation)
        ("start_ns", _I64),
        ("dur_ns", _I64),
        ("depth", _I32),
        ("external_id", _I64),
        ("domain", TEXT),  # NVTX domain name, or null
    ]
)

# Kineto flow events (ac2g / legacy async_cpu_to_gpu / fwdbwd). Kept so every
# input event is accounted for; linking itself uses `correlation`, because
# flow counts can disagree and some traces have none (trace-formats.md).
FLOWS = pa.schema(
    [
        ("row_id", _I64),
        ("flow_id", _I64),
        ("category", TEXT),
        ("phase", TEXT),  # "s" (start, on the CPU call) or "f" (finish, on the GPU event)
        ("pid", _I64),
        ("tid", _I64),
        ("ts_ns", _I64),
    ]
)

SCHEMAS: dict[str, pa.Schema] = {
    "host_events": HOST_EVENTS,
    "api_calls": API_CALLS,
    "device_activities": DEVICE_ACTIVITIES,
    "ranges": RANGES,
    "flows": FLOWS,
}

TABLE_NAMES = tuple(SCHEMAS)


def empty_table(name: str) -> pa.Table:
    """An empty table with the canonical schema of ``name``."""
    return SCHEMAS[name].empty_table()


def conform(name: str, table: pa.Table) -> pa.Table:
    """Cast ``table`` to the canonical schema of ``name`` (column order, types).

    Readers call this once at the boundary so that analyses can trust the
    columns they read.
    """
    schema = SCHEMAS[name]
    columns = []
    for field in schema:
        if field.name not in table.column_names:
            raise KeyError(f"{name}: missing column {field.name}")
        column = table.column(field.name).cast(field.type)
        columns.append(one_dictionary(column) if pa.types.is_dictionary(field.type) else column)
    return pa.Table.from_arrays(columns, schema=schema)


def one_dictionary(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A dictionary column as one chunk with one dictionary.

    Readers encode text chunk by chunk (a 10 M-event Kineto trace arrives in
    ~1,000 chunks, each with its own dictionary); one dictionary per column
    gives every consumer stable codes without unifying them again.
    """
    if column.num_chunks <= 1:
        return column
    return pa.chunked_array([column.unify_dictionaries().combine_chunks()], type=column.type)
