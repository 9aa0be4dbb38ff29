"""Library kernels are found on evidence: library ranges, then the launching op, then the kernel's own name."""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from taxbreak.decompose import analyze
from taxbreak.decompose.classify import kernel_base_name, name_is_library, op_verdict
from taxbreak.synth.planted import PlantedLaunch, PlantedOp, PlantedSpec, PlantedStep, build

NAMES = {
    # FlashAttention instantiates CUTLASS types: its template arguments name cutlass, its own name does not
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 64, 4, false, false, cutlass::half_t>>": False,
    "nvjet_tst_128x64_64x8_1x1_v_bz_TNT": True,  # cuBLAS JIT GEMM on Hopper/Blackwell
    "void moe::dev::finalize::finalizeKernel<cutlass::bfloat16_t, float>(moe::dev::finalize::Params)": False,
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>(Params)": True,
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublasLt": True,
    "ampere_sgemm_128x64_tn": True,
    "void cublasLt::splitKreduce_kernel<32, 16, int, float, float>(cublasLt::cublasSplitKParams<float>)": True,
    "Cijk_Alik_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1": True,
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int)": False,
    "void (anonymous namespace)::softmax_warp_forward<float, float, float, 8, false>(float*)": False,
    "triton_poi_fused_add_mul_0": False,
}


def test_library_by_the_kernels_own_name_not_its_template_arguments():
    got = name_is_library(pa.array(list(NAMES)))
    assert dict(zip(NAMES, got.tolist())) == NAMES
    assert kernel_base_name(pa.array(["void cutlass::Kernel2<x>(y)"])).to_pylist() == ["cutlass::Kernel2"]


def test_the_launching_op_decides_before_the_name():
    ops = np.array(["aten::addmm", "aten::_scaled_dot_product_flash_attention", "vllm::unified_attention_with_output",
                    "aten::add", "aten::_scaled_dot_product_cudnn_attention", None], dtype=object)
    assert op_verdict(ops).tolist() == [1, 0, 0, -1, 1, -1]


def _launch(kernel: str, lib: bool) -> PlantedLaunch:
    return PlantedLaunch(kernel, 2_000, 3_000 if lib else 0, 4_000, 1_000, 10_000, lib)


def _spec(with_ranges: bool = False) -> PlantedSpec:
    ops = [PlantedOp("fwd", "aten::mm", 1_000, [_launch("void some_vendor_gemm<float>", True)]),
           PlantedOp("fwd", "aten::_flash_attention_forward", 1_000,
                     [_launch("void pytorch_flash::flash_fwd_kernel<cutlass::half_t>", False)]),
           PlantedOp("fwd", "aten::add", 1_000, [_launch("nvjet_tst_64x8_TNT", True)]),
           PlantedOp("fwd", "aten::add", 1_000, [_launch("void at::native::add_kernel<float>", False)])]
    return PlantedSpec([PlantedStep("decode", ops)], with_library_ranges=with_ranges)


def test_evidence_column_and_the_estimated_part_of_ct(tmp_path):
    a = analyze(build(_spec()).tables, floor_us=4.71)
    k = a.kernels.sort_values("start_ns")
    assert k["is_library"].tolist() == [True, False, True, False]
    assert k["library_evidence"].tolist() == ["op", "op", "name", "name"]
    s = a.summary["all"]
    # base = median T_dispatch of the framework kernels = 2,000 ns; each library kernel has 5,000
    assert s["library_us"] == 6.0 and s["library_by_name_us"] == 3.0  # the nvjet kernel's ΔCT rests on its name
    written = a.to_parquet(tmp_path)
    assert "library_evidence" in pq.read_table(tmp_path / "kernels.parquet").column_names
    assert json.loads(a.to_json())["all"]["library_by_name_us"] == 3.0
    assert len(written) >= 2


def test_library_ranges_decide_where_the_trace_has_them():
    planted = build(_spec(with_ranges=True))
    a = analyze(planted.tables, floor_us=4.71)
    k = a.kernels.sort_values("start_ns")
    assert k["library_evidence"].tolist() == ["range"] * 4
    assert k["is_library"].tolist() == [True, False, True, False]
    assert a.summary["all"]["library_by_name_us"] == 0.0
