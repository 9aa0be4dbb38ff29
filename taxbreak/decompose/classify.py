"""Kernel labels: vendor-library flag (I_lib) with the evidence that decided it, and a coarse class.

A kernel is library work (cuBLAS/cuBLASLt, cuDNN, hipBLASLt/rocBLAS, MIOpen) on
evidence, strongest first (docs/method.md §2, "Library flag"):

1. ``range``: the trace has cuBLAS/cuDNN API ranges (Nsight ``CUBLAS_EVENTS`` /
   ``CUDNN_EVENTS``): library iff its launch lies inside one (link.py);
2. ``op``: the dispatcher op that launched it is a library op (mm, addmm, bmm,
   _scaled_mm, cuDNN convolution …: library) or an attention op (FlashAttention,
   memory-efficient attention, custom ``…attention…`` ops: framework-native);
3. ``name``: a maintained table matched against the kernel's *own* name — the text
   before its template arguments and parameter list — never the template arguments
   (``pytorch_flash::flash_fwd_kernel<…cutlass…>`` is not cuBLAS; ``nvjet_*`` is).

A kernel in PyTorch's own namespaces (``at::``, ``c10::``) or a Triton kernel is
framework work whatever op launched it. ΔCT that rests on ``name`` alone is an
estimate and is reported as such (``library_by_name_us``).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

EVIDENCE = ("range", "op", "name")
# Kernel base names of vendor-library kernels. cuBLAS: cublas*/cublasLt::*, nvjet_* (Hopper/Blackwell
# JIT GEMMs), <arch>_*gemm / sm<NN>_xmma_*, gemv/splitKreduce/dot/scal helpers, cuBLAS's own CUTLASS
# kernels (cutlass_<arch>_*, cutlass::Kernel/Kernel2); cuDNN: cudnn*, implicit/explicit/precomputed
# convolve, winograd, fft; ROCm: Tensile Cijk_*, rocblas*, hipblaslt*, MIOpen (miopen*, igemm*).
LIBRARY_BASE_PATTERN = (
    r"(?i)^(cublas|nvjet|(sm\d+|ampere|volta|turing|hopper|maxwell|pascal|blackwell)_\w*(gemm|xmma|conv|fprop|dgrad|wgrad)"
    r"|xmma_|cutlass_\d|cutlass::kernel2?$|cudnn|implicit_convolve|explicit_convolve|precomputed_convolve"
    r"|winograd|fft2d|gemv2?[nt]?_kernel|gemmk1_kernel|gemmsn|splitkreduce|dot_kernel|scal_kernel|axpy_kernel"
    r"|reduce_1block_kernel|cijk_|rocblas|hipblaslt|miopen|igemm)")
FRAMEWORK_BASE_PATTERN = r"^(at::|c10::|triton)"
LIBRARY_OPS = frozenset(f"aten::{name}" for name in (
    "mm", "addmm", "bmm", "baddbmm", "addbmm", "addmv", "mv", "dot", "vdot", "matmul", "linear", "_scaled_mm",
    "_int_mm", "_addmm_activation", "convolution", "_convolution", "convolution_backward", "cudnn_convolution",
    "cudnn_convolution_transpose", "cudnn_convolution_relu", "cudnn_convolution_add_relu", "cudnn_batch_norm",
    "cudnn_batch_norm_backward", "_cudnn_rnn", "_cudnn_rnn_backward", "miopen_convolution", "miopen_batch_norm",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_cudnn_attention_backward"))
ATTENTION_OP_PATTERN = (r"(?i)^aten::(_flash_attention|_efficient_attention|_scaled_dot_product_(flash|efficient)"
                        r"|scaled_dot_product_attention)|^\w+::\w*(attention|attn|flash)")  # library aten ops win (op_verdict)


def kernel_base_name(names: pa.Array) -> pa.Array:
    """The kernel's own name: without ``void``/anonymous-namespace prefixes, template arguments
    and parameter list (``void cutlass::Kernel2<cutlass_80_…>(…)`` → ``cutlass::Kernel2``)."""
    bare = pc.replace_substring_regex(names, r"^void\s+", "")
    bare = pc.replace_substring_regex(bare, r"\(anonymous namespace\)::", "")
    return pc.struct_field(pc.extract_regex(bare, r"^(?P<base>[^<(]*)"), [0])


def _matches(values: pa.Array, pattern: str) -> np.ndarray:
    hit = pc.fill_null(pc.match_substring_regex(values, pattern), False)
    return np.asarray(hit.to_numpy(zero_copy_only=False), dtype=bool)


def _name_is_library(names: pa.Array) -> np.ndarray:
    return _matches(pc.fill_null(kernel_base_name(names), ""), LIBRARY_BASE_PATTERN)


def _name_is_framework(names: pa.Array) -> np.ndarray:
    return _matches(pc.fill_null(kernel_base_name(names), ""), FRAMEWORK_BASE_PATTERN)


def name_is_library(names: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """I_lib from the kernel's own name alone (bool per kernel)."""
    return _per_distinct(names, _name_is_library).astype(bool)


def name_is_framework(names: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """True for kernels in PyTorch's own namespaces or Triton kernels (never library work)."""
    return _per_distinct(names, _name_is_framework).astype(bool)


def op_verdict(op_names: np.ndarray) -> np.ndarray:
    """Per distinct op name: 1 = a library op, 0 = an attention (framework-native) op, -1 = no say."""
    names = pa.array([n if isinstance(n, str) else None for n in op_names], pa.string())
    library = np.isin(np.asarray(op_names, dtype=object), list(LIBRARY_OPS))
    attention = _matches(names, ATTENTION_OP_PATTERN)
    return np.where(library, 1, np.where(attention, 0, -1)).astype(np.int8)


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
