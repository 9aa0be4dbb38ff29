"""Host time inside launching ops is conserved, and components never exceed what was measured.

The planted sequence is the H100 ``aten::addmm`` of the field report: 10.3 µs of dispatch
(``aten::empty``), cuBLASLt heuristics until a workspace ``cudaMemsetAsync`` at +55.2 µs
(6.5 µs), then the GEMM's launch at +64.7 µs. The GEMM's T_dispatch is everything before its
launch except the memset call: ΔCT keeps the 55 µs of library host time.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from conftest import shared_trace_paths
from taxbreak.decompose import analyze
from taxbreak.decompose.op_chain import ACCOUNT_PARTS
from taxbreak.synth.planted import PlantedLaunch, PlantedOp, PlantedSpec, PlantedStep, build

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublasLt"
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>"


def _addmm_with_workspace_memset() -> PlantedOp:
    # gap to the memset 55,200 ns, memset call 6,500 ns, then 3,000 ns to the launch
    gemm = PlantedLaunch(GEMM, dispatch_ns=58_200, library_ns=0, launch_dur_ns=4_000, latency_ns=0,
                         kernel_dur_ns=20_000, is_library=True, memset_at_ns=55_200, memset_dur_ns=6_500)
    return PlantedOp("torch/nn/modules/linear.py(125): forward", "aten::addmm", 2_000, [gemm], tail_ns=9_200)


def _native_op(dispatch_ns: int) -> PlantedOp:
    fill = PlantedLaunch(FILL, dispatch_ns=dispatch_ns, library_ns=0, launch_dur_ns=3_000, latency_ns=0,
                         kernel_dur_ns=5_000, is_library=False)
    return PlantedOp("torch/nn/functional.py(10): fill", "aten::fill_", 1_000, [fill], tail_ns=500)


@pytest.fixture(scope="module")
def planted():
    spec = PlantedSpec([PlantedStep("decode", [_native_op(8_000), _addmm_with_workspace_memset(),
                                               _native_op(12_000)])])
    return build(spec), analyze(build(spec).tables, floor_us=4.71)


def test_library_time_before_a_workspace_memset_reaches_ct(planted):
    _, a = planted
    gemm = a.kernels[a.kernels["name"] == GEMM].iloc[0]
    assert a.summary["meta"]["t_dispatch_base_us"] == 10.0  # median of 8,000 and 12,000 ns
    assert gemm["t_dispatch_ns"] == 58_200  # 55,200 before the memset + 3,000 after it
    assert gemm["ft_dispatch_ns"] == 10_000 and gemm["ct_ns"] == 48_200
    memset = a.kernels[a.kernels["kind"] == "memset"].iloc[0]
    assert pd.isna(memset["ct_ns"]) and pd.isna(memset["t_dispatch_ns"])


def test_the_op_account_adds_up_to_the_op(planted):
    _, a = planted
    acc = a.op_accounts.set_index("op_name")
    addmm = acc.loc["aten::addmm"]
    assert addmm["dur_ns"] == 58_200 + 6_500 + 4_000 + 9_200
    assert (addmm["dispatch_ns"], addmm["copy_call_ns"], addmm["launch_call_ns"],
            addmm["after_last_launch_ns"], addmm["sync_call_ns"]) == (58_200, 6_500, 4_000, 9_200, 0)
    assert len(acc) == 3
    _assert_conserved(a)


def test_a_library_kernel_never_gets_more_dispatch_than_measured():
    # the GEMM's T_dispatch (3 µs) is below the 10 µs baseline: ΔFT dispatch is 3 µs, not 10
    gemm = PlantedLaunch(GEMM, dispatch_ns=3_000, library_ns=0, launch_dur_ns=4_000, latency_ns=0,
                         kernel_dur_ns=20_000, is_library=True)
    op = PlantedOp("torch/nn/modules/linear.py(125): forward", "aten::addmm", 2_000, [gemm])
    a = analyze(build(PlantedSpec([PlantedStep("decode", [_native_op(8_000), op, _native_op(12_000)])])).tables,
                floor_us=4.71)
    k = a.kernels[a.kernels["name"] == GEMM].iloc[0]
    assert (k["t_dispatch_ns"], k["ft_dispatch_ns"], k["ct_ns"]) == (3_000, 3_000, 0)


def _assert_conserved(a) -> None:
    """Per launching root op: dispatch + launch + copy + sync calls + after = its duration, and the
    dispatch part equals ΔFT dispatch + ΔCT of its kernels (+ T_dispatch of launches without kernels)."""
    acc = a.op_accounts
    parts = acc[list(ACCOUNT_PARTS)].sum(axis=1)
    assert (parts == acc["dur_ns"]).all()
    assert (acc[list(ACCOUNT_PARTS)] >= 0).all().all()


@pytest.mark.parametrize("path", shared_trace_paths(), ids=lambda p: p.name)
def test_op_accounts_conserve_on_every_real_trace(path):
    a = analyze(path)
    _assert_conserved(a)
    k = a.kernels
    carriers = k[(k["kind"] == "kernel") & k["first_of_launch"] & k["t_dispatch_ns"].notna()]
    if a.summary["meta"]["t_dispatch_base_us"] is not None:
        # ΔFT dispatch + ΔCT = T_dispatch exactly: no component adds time that was not measured
        both = carriers["ft_dispatch_ns"].astype("int64") + carriers["ct_ns"].astype("int64")
        assert (both == carriers["t_dispatch_ns"].astype("int64")).all()
    # every kernel launch's T_dispatch lies in its root op's dispatch part
    assert int(carriers["t_dispatch_ns"].sum()) <= int(a.op_accounts["dispatch_ns"].sum())
    assert np.all(a.op_accounts["launches"] >= 1)
