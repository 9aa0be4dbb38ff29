"""The TaxBreak equations applied to planted truth (independent of any trace linking)."""
from __future__ import annotations

import numpy as np
import pandas as pd


def expected_components(truth: pd.DataFrame, floor_ns: int) -> pd.DataFrame:
    """ΔFT/ΔCT/ΔKT per planted kernel, by the paper's equations."""
    t = truth.copy()
    sample = t.loc[~t["is_library"] & (t["t_dispatch_ns"] > 100), "t_dispatch_ns"]
    base = int(round(float(np.median(sample)))) if len(sample) else None
    t["ft_python_ns"] = np.where(t["first_in_op"], t["t_py_ns"], 0)
    if base is None:
        t["ft_dispatch_ns"] = t["t_dispatch_ns"]
    else:
        t["ft_dispatch_ns"] = np.where(t["is_library"], base, t["t_dispatch_ns"])
        t["ct_ns"] = np.where(t["is_library"], np.maximum(t["t_dispatch_ns"] - base, 0), 0)
    t["ft_ns"] = t["ft_python_ns"] + t["ft_dispatch_ns"]
    t["kt_floor_ns"] = floor_ns
    t["kt_residual_ns"] = np.maximum(t["t_launch_ns"] - floor_ns, 0)
    t.attrs["base"] = base
    return t


COMPONENTS = ["t_py_ns", "t_dispatch_ns", "t_launch_ns", "dur_ns", "is_library", "ft_python_ns",
              "ft_dispatch_ns", "ft_ns", "kt_floor_ns", "kt_residual_ns"]


def compare_kernels(kernels: pd.DataFrame, truth: pd.DataFrame, floor_ns: int) -> None:
    """Assert every planted component is recovered exactly (ns)."""
    exp = expected_components(truth, floor_ns).set_index("correlation").sort_index()
    got = kernels.set_index("correlation").sort_index()
    assert list(got.index) == list(exp.index)
    cols = COMPONENTS + (["ct_ns"] if exp.attrs["base"] is not None else [])
    for col in cols:
        g = got[col].astype("int64").to_numpy()
        e = exp[col].astype("int64").to_numpy()
        assert (g == e).all(), f"{col}: got {g[g != e][:5]}, planted {e[g != e][:5]}"
    assert (got["step"].to_numpy() == exp["step"].to_numpy()).all()
    assert (got["phase"].to_numpy() == exp["phase"].to_numpy()).all()


def compare_partition(partition: pd.DataFrame, planted_steps: pd.DataFrame, library_ranges: bool) -> None:
    """Per step, the host partition equals the planted host time of each kind."""
    got = partition.set_index("step").sort_index()
    exp = planted_steps.set_index("step").sort_index()
    assert list(got.index) == list(exp.index)
    for part in ("python", "dispatch", "library", "launch_api", "untraced"):
        assert (got[f"host_{part}_ns"] == exp[part]).all(), part
    assert (got["host_sync_ns"] == 0).all() and (got["host_other_api_ns"] == 0).all()
    assert (got["host_wall_ns"] == exp["wall"]).all()
