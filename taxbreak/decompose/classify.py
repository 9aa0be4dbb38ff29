"""Kernel labels: vendor-library flag (I_lib) and a coarse kernel class.

I_lib follows the authors' name rule (SODA ``is_library_mediated_kernel``):
a kernel is library-mediated when its name contains ``cublas``/``cublasLt``/
``cutlass`` (we add cuDNN) and none of ``nvjet``, ``wgmma``, ``s884gemm``
(framework-native GEMMs). Where the trace carries cuBLAS/cuDNN API ranges the
link step decides from those instead (see ``link.py``).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# NVIDIA: cuBLAS/cuBLASLt, CUTLASS (as shipped in cuBLAS), cuDNN. ROCm: rocBLAS and hipBLASLt GEMMs are
# Tensile kernels named Cijk_…, plus rocblas/hipblaslt/MIOpen-named kernels.
LIBRARY_PATTERN = r"(?i)cublas|cutlass|cudnn|rocblas|hipblas|miopen|^cijk_"
NATIVE_GEMM_PATTERN = r"(?i)nvjet|wgmma|s884gemm"

# (class, regex) in priority order; the first match wins. Memcpy/memset come
# from the device activity kind, not the name.
KERNEL_CLASSES: list[tuple[str, str]] = [
    ("communication", r"(?i)nccl|all_?reduce|all_?gather|reduce_?scatter|alltoall|sendrecv"),
    ("attention", r"(?i)flash|fmha|attention|attn|softmax_?warp|sdpa|paged_?kv|mha_"),
    ("native_gemm", r"(?i)nvjet|wgmma|s884gemm|gemm|gemv|matmul|triton_.*mm|sm\d+_xmma|splitkreduce"),
    ("reduction", r"(?i)reduce|norm|sum_|mean|argmax|topk|sort|scan|cumsum|max_|min_"),
    ("elementwise", r"(?i)elementwise|vectorized|unrolled|copy|cat_|fill|index|gather|scatter|where|triton"),
]
CLASS_NAMES = ("library_gemm", "native_gemm", "attention", "elementwise", "reduction",
               "memcpy", "memset", "communication", "other")


def _per_distinct(names: pa.Array | pa.ChunkedArray, fn) -> np.ndarray:
    """Apply ``fn`` (Arrow array of distinct names -> numpy) once per distinct name, spread to rows."""
    encoded = pc.dictionary_encode(names)
    if isinstance(encoded, pa.ChunkedArray):
        empty = pa.array([], pa.dictionary(pa.int32(), pa.string()))
        encoded = encoded.combine_chunks() if encoded.num_chunks else empty
    if len(encoded) == 0:
        return fn(pa.array([], pa.string()))[:0]
    # a null name (no name in the trace) gets fn's value for null, kept after the distinct names
    # (filled with code 0 it took the first name's value, or failed when every name was null)
    dictionary = encoded.dictionary
    values = fn(pa.concat_arrays([dictionary, pa.nulls(1, dictionary.type)]))
    codes = np.asarray(pc.fill_null(encoded.indices, len(dictionary)).to_numpy(zero_copy_only=False), dtype=np.int64)
    return values[codes]


def name_is_library(names: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """I_lib from the kernel name alone (bool per kernel)."""
    return _per_distinct(names, _name_is_library).astype(bool)


def _name_is_library(names: pa.Array) -> np.ndarray:
    lib = pc.match_substring_regex(names, LIBRARY_PATTERN)
    native = pc.match_substring_regex(names, NATIVE_GEMM_PATTERN)
    out = pc.and_(pc.fill_null(lib, False), pc.invert(pc.fill_null(native, False)))
    return np.asarray(out.to_numpy(zero_copy_only=False), dtype=bool)


def kernel_class(names: pa.Array | pa.ChunkedArray, kinds: np.ndarray, is_library: np.ndarray) -> np.ndarray:
    """Coarse class per device activity: codes into ``CLASS_NAMES`` (int8)."""
    out = np.full(len(kinds), CLASS_NAMES.index("other"), dtype=np.int8)
    done = np.zeros(len(kinds), dtype=bool)
    for label, mask in (("memcpy", kinds == "memcpy"), ("memset", kinds == "memset"),
                        ("library_gemm", is_library & (kinds == "kernel"))):
        out[mask & ~done] = CLASS_NAMES.index(label)
        done |= mask
    by_name = _per_distinct(names, _class_by_name)
    out[~done] = by_name[~done]
    return out


def _class_by_name(names: pa.Array) -> np.ndarray:
    out = np.full(len(names), CLASS_NAMES.index("other"), dtype=np.int8)
    done = np.zeros(len(names), dtype=bool)
    for label, pattern in KERNEL_CLASSES:
        hit = np.asarray(pc.fill_null(pc.match_substring_regex(names, pattern), False)
                         .to_numpy(zero_copy_only=False), dtype=bool)
        out[hit & ~done] = CLASS_NAMES.index(label)
        done |= hit
    return out
