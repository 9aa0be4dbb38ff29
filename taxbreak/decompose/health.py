"""Trace health: what in the trace limits the conclusions drawn from it (docs/method.md §3.4).

Every output opens with these checks. Each is ``pass`` or ``warn`` (``info`` for a fact
that limits nothing), with the numbers it rests on and the results it affects:

* ``links``: orphan kernels / launches and unlinked copies (T_DeviceActive, HDBI);
* ``capture``: the trace records CUDA-graph capture, not execution (every steady-state value);
* ``timeline``: device work that starts before its launch call (clock skew), and a
  constant host→device offset: even the fastest launches onto an idle device start far
  after their call (``TIMELINE_LAG_NS``), so issued-side idle causes are suspect;
* ``window``: device work running when the trace starts (the window cuts a step);
* ``warmup``: first calls inside the window carry a share of T_Orchestrate;
* ``coverage``: launches outside any framework op (HDBI only over the covered part);
* ``library``: ΔCT that rests on kernel names alone (an estimate);
* ``floor``: where T_sys comes from and whether the GPU is named.

``affected_causes`` lists the idle causes whose advice is withheld when a check warns.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .dependency import values_by_device

TIMELINE_LAG_NS = 1_000_000  # the fastest 5 % of idle-device launches starting ≥ 1 ms late: no launch path is that slow
MIN_LAG_SAMPLE = 10
ORPHAN_SHARE = 0.01
WARMUP_WARN_SHARE = 0.10
ISSUED_CAUSES = ("launch_floor", "launch_latency", "dependency_wait", "graph_internal", "copy_issued")


def _check(name: str, ok: bool, detail: str, affects: str = "", causes: tuple = (), info: bool = False) -> dict:
    return {"check": name, "status": "info" if info else ("pass" if ok else "warn"), "detail": detail,
            "affects": affects if not ok else "", "affected_causes": list(causes) if not ok else []}


def copy_facts(kernels: pd.DataFrame) -> dict:
    """Copies in the trace and how many moved pageable host memory (Kineto/Nsight name the memory
    kind in the copy's name: ``Memcpy HtoD (Pageable -> Device)``)."""
    copies = kernels["kind"] == "memcpy"
    names = kernels["name"]  # a categorical: the name test runs once per distinct name
    cats = names.cat.categories
    pageable = copies & names.isin(cats[cats.str.contains("Pageable", regex=False)])
    return {"copies": int(copies.sum()), "pageable_copies": int(pageable.sum())}


def idle_launch_lag_ns(kernels: pd.DataFrame, idle_at_launch: np.ndarray) -> dict:
    """Per device: the 5th percentile of launch-to-start over the work (kernels that carry their
    launch, copies, memsets) launched onto an idle device, or None with fewer than MIN_LAG_SAMPLE."""
    carrier = kernels["first_of_launch"].to_numpy(bool) & kernels["launch_start_ns"].notna().to_numpy(bool)
    t_launch = kernels["t_launch_ns"].to_numpy(np.int64, na_value=-1)
    device = kernels["device"].to_numpy(np.int64)
    sample = carrier & idle_at_launch & (t_launch >= 0)
    by_device = values_by_device(device, t_launch, sample)
    out = {}
    for d in np.unique(device).tolist():  # one value per device, each from its own slice
        values = by_device.get(d, t_launch[:0])
        out[str(d)] = int(np.percentile(values, 5)) if len(values) >= MIN_LAG_SAMPLE else None
    return out


def trace_health(summary: dict, kernels: pd.DataFrame, lag_ns: dict) -> list[dict]:
    """The health checks of one analysed trace (module docstring), in display order."""
    s, meta, diags = summary["all"], summary["meta"], summary.get("diagnostics") or {}
    return [_links(s), _capture(meta), _timeline(lag_ns, diags), _window(kernels), _warmup(summary.get("warmup")),
            _coverage(s), _library(s), _floor(meta, s)]


def _links(s: dict) -> dict:
    kernels, orphans = s.get("kernels") or 0, s.get("orphan_kernels") or 0
    launches, orphan_launches = s.get("launches") or 0, s.get("orphan_launches") or 0
    share = max(orphans / kernels if kernels else 0.0, orphan_launches / launches if launches else 0.0)
    return _check("links", share <= ORPHAN_SHARE,
                  f"{orphans:,} of {kernels:,} kernels without a launch call, {orphan_launches:,} of {launches:,} "
                  f"launch calls without device work, {s.get('orphan_copies') or 0:,} copies without a call",
                  "T_DeviceActive and HDBI are over the linked kernels only")


def _capture(meta: dict) -> dict:
    cap = meta.get("graph_capture") or {}
    captured = cap.get("captured_launches") or 0
    return _check("capture", not cap.get("dominant"),
                  f"{captured:,} launch calls captured into CUDA graphs, {cap.get('executed_kernels') or 0:,} "
                  "kernels executed" if captured else "no CUDA-graph capture in the trace",
                  "the trace records graph capture, not execution: no steady-state value applies")


def _timeline(lag_ns: dict, diags: dict) -> dict:
    skew = _diag_count(diags, "decompose.negative_interval")
    lagged = {d: v for d, v in lag_ns.items() if v is not None and v >= TIMELINE_LAG_NS}
    parts = [f"{skew:,} device activities start before their launch call" if skew else "",
             ("constant host→device offset: on device " + ", ".join(f"{d} even the fastest 5% of launches onto an "
              f"idle device started ≥ {v / 1e3:,.1f} µs after their call" for d, v in lagged.items())) if lagged else ""]
    detail = "; ".join(p for p in parts if p) or "launch-to-start on an idle device is plausible on every device"
    return _check("timeline", not lagged and not skew, detail,
                  "the idle time after work was issued (launch latency, dependency waits, copies issued) may be "
                  "a clock offset, not waiting", ISSUED_CAUSES if lagged else ())


def _diag_count(diags: dict, code: str) -> int:
    value = diags.get(code)
    if isinstance(value, dict):
        return int(value.get("count", 0))
    return int(value or 0)


def _window(kernels: pd.DataFrame) -> dict:
    """Orphan device work that starts before the first launch call of the trace: the window opened mid-step."""
    launched = kernels["launch_start_ns"].dropna()
    orphan = kernels["launch_start_ns"].isna()
    early = int((orphan & (kernels["start_ns"] < launched.min())).sum()) if len(launched) else 0
    return _check("window", early == 0,
                  f"{early:,} device activities ran before the first launch call of the trace" if early
                  else "the window starts before the device work it holds",
                  "the first step is cut: its device time has no host side in the trace")


def _warmup(w: dict | None) -> dict:
    share = (w or {}).get("orchestration_share")
    calls = (w or {}).get("calls") or 0
    ok = share is None or share < WARMUP_WARN_SHARE
    detail = (f"{calls} first call(s) far above later calls of the same op carry {100.0 * share:.0f}% of "
              "T_Orchestrate" if calls and share is not None else f"{calls} first call(s) flagged as warm-up")
    return _check("warmup", ok, detail, "ΔFT/ΔCT include one-time initialisation: profile after warm-up")


def _coverage(s: dict) -> dict:
    coverage = s.get("hdbi_coverage")
    ok = coverage is None or coverage >= 1.0
    detail = ("no launch calls" if coverage is None else
              f"{100.0 * coverage:.1f}% of launch calls lie inside a framework op (ΔFT measured)")
    return _check("coverage", ok, detail, "HDBI is given only over the covered launches (hdbi_covered)")


def _library(s: dict) -> dict:
    ct, by_name = s.get("library_us"), s.get("library_by_name_us")
    if not s.get("kernels"):
        return _check("library", True, "no kernels in the trace")
    if ct is None:
        return _check("library", False, "ΔCT not measured (no dispatch baseline)", "ΔCT and HDBI are not measured")
    share = by_name / ct if ct and by_name else 0.0
    return _check("library", share == 0.0,
                  f"{by_name or 0:,.1f} of {ct:,.1f} µs of ΔCT rest on kernel names alone" if ct
                  else "no library host time", "that part of ΔCT is an estimate (library_by_name_us)")


def _floor(meta: dict, s: dict) -> dict:
    source, gpu = meta.get("floor_source"), meta.get("gpu")
    if meta.get("floor_us") is None and not s.get("kernels"):  # a CPU run: no launch, no floor to doubt
        return _check("floor", True, f"no kernels, so no launch floor (source: {source})")
    ok = source in ("measured", "given", "published:H100", "published:H200")
    floor = "not measured" if meta.get("floor_us") is None else f"{meta['floor_us']} µs"
    detail = f"T_sys {floor} from {source}; GPU: {gpu or 'not named in the trace'}"
    return _check("floor", ok, detail, "ΔKT's floor is a placeholder: run `taxbreak floor` on this GPU or pass "
                  "--floor-us")
