"""What the Nsight Systems SQLite export looks like, as data.

Table and column names, enum defaults for exports that lack the ``ENUM_*``
tables (schema 2.x), and the rules that name API calls and device
activities. Everything here is checked against the real exports listed in
docs/trace-model-nsys.md (schemas 2.9.1, 3.24.14, 3.25.0).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from . import kineto_vocab

# --- tables ---------------------------------------------------------------

EXPORT_META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA")  # 3.x, 2.x
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
NVTX = "NVTX_EVENTS"
CUBLAS = "CUBLAS_EVENTS"
CUDNN = "CUDNN_EVENTS"
STRINGS = "StringIds"
THREAD_NAMES = "ThreadNames"
PROCESSES = "PROCESSES"
TARGET_GPU = "TARGET_INFO_GPU"
SYSTEM_ENV = "TARGET_INFO_SYSTEM_ENV"
SESSION_START = "TARGET_INFO_SESSION_START_TIME"
ENUM_EVENT_CLASS = "ENUM_NSYS_EVENT_CLASS"
ENUM_EVENT_TYPE = "ENUM_NSYS_EVENT_TYPE"
ENUM_MEM_KIND = "ENUM_CUDA_MEM_KIND"

# The tables whose rows are input events (meta.input_events counts them).
EVENT_TABLES = (RUNTIME, CUBLAS, CUDNN, KERNEL, MEMCPY, MEMSET, SYNC, NVTX)
LIBRARY_TABLES = {CUBLAS: "cublas", CUDNN: "cudnn"}

# --- serialized GlobalId ----------------------------------------------------
# globalTid = ... | pid << 24 | tid; globalPid = globalTid & ~0xFFFFFF
# (docs: "Serialized GlobalId"; verified on the saxpy and nsys-ai exports).
ID_BITS = 24
ID_MASK = 0xFFFFFF

# --- enums (defaults when the ENUM_* table is absent, as in schema 2.9.1) ---

# ENUM_NSYS_EVENT_CLASS ids of the RUNTIME table's eventClass.
EVENT_CLASS_NAMES = {
    "TRACE_PROCESS_EVENT_CUDA_RUNTIME": 0,
    "TRACE_PROCESS_EVENT_CUDA_DRIVER": 1,
    # Schema 2.9.1 writes every API call a second time with this class (an
    # unsuffixed name, the same correlationId, a slightly wider interval).
    "TRACE_PROCESS_EVENT_CUDABACKTRACE": 67,
}

# ENUM_NSYS_EVENT_TYPE ids of NVTX_EVENTS.eventType.
NVTX_TYPE_NAMES = {
    "NvtxCategory": 33,
    "NvtxMark": 34,
    "NvtxThread": 39,
    "NvtxPushPopRange": 59,
    "NvtxStartEndRange": 60,
    "NvtxDomainCreate": 75,
}

# ENUM_CUDA_MEMCPY_OPER ids -> the short direction Kineto prints
# ("Memcpy HtoD (Pinned -> Device)").
MEMCPY_DIRECTIONS = {
    0: "Unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD",
    7: "DtoA", 8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "Unified HtoD", 12: "Unified DtoH",
    13: "Unified DtoD",
}

# ENUM_CUDA_MEM_KIND ids (nsys numbering; CUPTI's own enum is shifted by one).
MEM_KINDS = {
    0: "Pageable", 1: "Pinned", 2: "Device", 3: "Array", 4: "Managed", 5: "Device Static",
    6: "Managed Static", 7: "Unknown",
}

# ENUM_CUPTI_SYNC_TYPE ids -> the names Kineto gives cuda_sync events
# (libkineto syncTypeString), so both readers name them alike.
SYNC_NAMES = {0: "Unknown Sync", 1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}

# --- API names --------------------------------------------------------------

# nsys appends the CUDA version that introduced the entry point
# (cudaLaunchKernel_v7000, cudaLaunchKernelExC_v11060), after any version the
# API carries itself (cudaStreamGetCaptureInfo_v2_v11030). All trailing
# ``_v<digits>`` groups are stripped, so the nsys and Kineto readers give the
# same api_name (Kineto prints cudaStreamGetCaptureInfo_v2, stripped once).
NSYS_VERSION_SUFFIX = re.compile(r"(?:_v\d+)+$")


def strip_version(name: str) -> str:
    """``cudaLaunchKernel_v7000`` -> ``cudaLaunchKernel``; names without a suffix unchanged."""
    return NSYS_VERSION_SUFFIX.sub("", name)


def api_kind(api_name: str) -> str:
    """The API_KINDS value of a normalized CUDA/HIP API name (library calls excluded).

    The rule is the Kineto reader's (:func:`taxbreak.readers.kineto_vocab.api_kind`),
    so one call gets the same kind from either format: ``launch``,
    ``graph_launch``, ``memcpy``, ``memset``, ``sync`` (the host blocks:
    stream/device/event/context synchronize) or ``other`` (including
    ``cudaStreamWaitEvent`` and the non-blocking ``cudaEventQuery``).
    """
    return kineto_vocab.api_kind(api_name)


def api_domain_from_name(api_name: str) -> str:
    """Domain of an API call whose eventClass is neither runtime nor driver."""
    if api_name.startswith("hip"):
        return "hip_runtime"
    if api_name.startswith("cuda"):
        return "cuda_runtime"
    return "cuda_driver"


# Text columns are read through CAST AS TEXT, so a number or blob stored where
# a name belongs arrives as text (invalid UTF-8 then counted by LenientText).
TEXT_SQL = 'CAST("{c}" AS TEXT)'
INT_SQL = 'CAST(COALESCE("{c}", {default}) AS INTEGER)'
IS_TEXT = "(typeof(\"{c}\") IN ('text', 'null'))"


@dataclass(frozen=True)
class Col:
    """One output column of a table read: the first present source column wins.

    ``default`` is used for NULL values and when no source column exists,
    because nsys creates columns per version and per traced feature.
    """

    out: str
    sources: tuple[str, ...]
    default: int = -1
    text: bool = False
    sql: str = ""  # empty: INT_SQL, or TEXT_SQL for a text column

    @property
    def template(self) -> str:
        return self.sql or (TEXT_SQL if self.text else INT_SQL)


def cols(*specs: tuple) -> tuple[Col, ...]:
    """Shorthand: ``("out", "src1", "src2")`` -> ``Col("out", ("src1", "src2"))``."""
    return tuple(Col(s[0], tuple(s[1:]) or (s[0],)) for s in specs)


TIME_COLS = cols(("start_ns", "start"), ("end_ns", "end"))

RUNTIME_COLS = TIME_COLS + cols(
    ("event_class", "eventClass"), ("global_tid", "globalTid"),
    ("correlation", "correlationId"), ("name_id", "nameId"),
)

LIBRARY_COLS = TIME_COLS + cols(("global_tid", "globalTid"), ("name_id", "nameId"))

_DEVICE_COMMON = TIME_COLS + cols(
    ("device", "deviceId"), ("context", "contextId"), ("stream", "streamId"),
    ("correlation", "correlationId"), ("global_pid", "globalPid"),
)

KERNEL_COLS = _DEVICE_COMMON + cols(
    ("demangled_id", "demangledName"), ("short_id", "shortName"),
    ("grid_x", "gridX"), ("grid_y", "gridY"), ("grid_z", "gridZ"),
    ("block_x", "blockX"), ("block_y", "blockY"), ("block_z", "blockZ"),
    ("registers", "registersPerThread"), ("static_smem", "staticSharedMemory"),
    ("dynamic_smem", "dynamicSharedMemory"), ("graph_id", "graphId"), ("graph_node_id", "graphNodeId"),
)

MEMCPY_COLS = _DEVICE_COMMON + cols(
    ("bytes", "bytes"), ("copy_kind", "copyKind"), ("src_kind", "srcKind"), ("dst_kind", "dstKind"),
    ("graph_node_id", "graphNodeId"),
)

MEMSET_COLS = _DEVICE_COMMON + cols(("bytes", "bytes"), ("mem_kind", "memKind"), ("graph_node_id", "graphNodeId"))

SYNC_COLS = _DEVICE_COMMON + cols(("sync_type", "syncType"))

NVTX_COLS = (
    Col("start_ns", ("start",)),
    Col("end_ns", ("end",)),
    # NULL end = a mark or an unterminated range; -1 alone cannot say so
    # because a time-shifted export may hold negative times.
    Col("has_end", ("end",), default=0, sql='("{c}" IS NOT NULL)'),
    *cols(("event_type", "eventType"), ("global_tid", "globalTid"), ("text_id", "textId"),
          ("domain_id", "domainId"), ("category", "category")),
    Col("text", ("text",), text=True),
)
