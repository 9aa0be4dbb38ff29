"""What to do about it: the next optimization target, read off one summary.

The rules follow the diagnostic guidance published with TaxBreak (arXiv
2603.12465; docs/method.md): the *largest* orchestration component names the
layer to work on — framework translation (ΔFT) and CUDA-library translation
(ΔCT) point at the software stack (e.g. ``torch.compile``), the launch floor
N·T_sys at the kernel count (fusion, CUDA Graphs), a large launch residual at
the driver/runtime path. No HDBI threshold is used: the paper defines none.
Whether fixing it pays is read from the device's idle time by cause
(``idle_by_cause_us``): only orchestration the device waited for costs
latency, and queueing behind device work is healthy on a device-bound trace.
"""
from __future__ import annotations

from dataclasses import dataclass

from .words import NOT_MEASURED

FT, CT, FLOOR = "framework_us", "library_us", "launch_floor_us"

_TARGETS = {
    FT: ("framework translation (ΔFT: Python + ATen dispatch)",
         "reduce per-op framework work: torch.compile, fewer and larger ops, less Python per step"),
    CT: ("CUDA-library translation (ΔCT: cuBLAS/cuDNN host side)",
         "reduce library front-end calls: larger or batched GEMMs, cached cuBLASLt heuristics, "
         "cudnn.benchmark only in warm-up"),
    FLOOR: ("the kernel launch floor (N·T_sys: too many kernels)",
            "launch fewer kernels: kernel fusion, CUDA Graphs for decode"),
}


@dataclass
class Advice:
    """One finding: what the numbers say and what to try."""

    finding: str
    action: str


def advise(summary: dict) -> list[Advice]:
    """Findings for the whole trace (``summary['all']``), most important first.

    One account drives the verdict and the advice: the device's idle time and
    the host layer that caused each idle ns (``idle_by_cause_us``). Layers are
    ranked by the idle time they caused (exposed), not by their raw sums.
    """
    s = summary["all"]
    if s.get("orchestration_us") is None:
        return [Advice("no kernels in the trace: the per-kernel split (ΔFT/ΔCT/ΔKT) and HDBI need a "
                       "CUDA device", "profile on a GPU; on this run compare host time per step and "
                       "ATen ops per token between models or versions")]
    out = [_verdict(s)]
    exposed = _exposed_layer(s)
    if exposed:
        out.append(exposed)
    stall = _stall(summary)
    if stall:
        out.append(stall)
    out.append(_dominant(s))
    if s.get("hdbi") is None and s.get("hdbi_reason"):
        out.append(Advice(f"HDBI is not measured: {s['hdbi_reason']}",
                          "capture with the PyTorch profiler (record_shapes, with_stack) or Nsight with "
                          "--pytorch=autograd-nvtx so every kernel links to its framework op"))
    return out


CAUSE_TARGETS = {
    "python": (FT, "Python between ops"), "dispatch": (FT, "ATen dispatch"),
    "library": (CT, "CUDA-library host code"), "launch_api": (FLOOR, "other kernel launch calls"),
    "launch_floor": (FLOOR, "the kernel launch floor"), "launch_latency": (FLOOR, "the kernel launch path"),
    "graph_internal": (None, "gaps inside CUDA graph replays"),
    "copy_issued": (None, "memcpy/memset calls issued but not yet started"),
    "sync": (None, "synchronize calls"), "other_api": (None, "other runtime API calls"),
    "untraced": (None, "untraced host time"), "unlinked": (None, "work without a launch call in the trace"),
    "blocked": (None, "blocked waits on the launching thread (locks, sleeps, queues, select)"),
    "host_stall": (None, "host stalls (data loading, preprocessing, long host pieces)"),
}
ACTIONS = {
    "sync": "remove device→host syncs from the step (.item(), .cpu(), data-dependent shapes)",
    "other_api": "look at the runtime calls on the launching thread (allocations, event queries, memcpy)",
    "untraced": "the launching thread did work no event covers: profile with Python frames (with_stack) "
                "or add NVTX ranges",
    "unlinked": "the trace misses the launch calls of some kernels: start the capture earlier",
    "graph_internal": "the device idled between a CUDA graph's own nodes: look at the graph's host nodes, "
                      "event waits and tiny kernels",
    "copy_issued": "copies started long after their call: use pinned host memory (pageable copies are staged "
                   "through a bounce buffer) and keep them off streams that wait on other work",
    "blocked": "the launching thread waited on another thread or process: look at what it waited for (a lock "
               "held by another thread, a queue fed too slowly, a sleep in the loop)",
    "host_stall": "take the stall off the GPU's critical path: more DataLoader workers or prefetching "
                  "(prefetch_factor, pin_memory), preprocessing in a separate process or ahead of time, "
                  "or leave it out of the profiled window; per-op work (torch.compile) does not shorten it",
}


def _idle_share(s: dict) -> float | None:
    devices = s.get("devices") or {}
    wall = s.get("wall_us")
    if not devices or not wall:
        return None
    return 100.0 * sum(d["idle_us"] for d in devices.values()) / (wall * len(devices))


def _verdict(s: dict) -> Advice:
    """Device-bound or host-bound, from the device's idle share (HDBI beside it where measured)."""
    idle = _idle_share(s)
    hdbi = s.get("hdbi")
    index = f"HDBI {hdbi:.3f}" if hdbi is not None else f"HDBI {NOT_MEASURED}"
    if idle is None:
        return Advice(f"{index}; device idle time {NOT_MEASURED}", "see the components below")
    queue = s.get("queue_wait_union_us")
    if idle < 20.0:
        return Advice(f"device-bound: the GPU was idle {idle:.0f}% of the elapsed time ({index}); kernels "
                      f"queued behind device work for {queue or 0:,.1f} µs, which is healthy queueing here",
                      "host-side fixes buy little latency; look at the kernels themselves")
    pending = (s.get("idle_by_cause_us") or {}).get("nothing_pending") or 0.0
    host_caused = 100.0 * (1 - pending / s["device_idle_us"]) if s.get("device_idle_us") else 0.0
    return Advice(f"the GPU was idle {idle:.0f}% of the elapsed time ({index}); the host caused "
                  f"{host_caused:.0f}% of that idle time (the rest had no work pending)",
                  "host-side fixes shorten the step where they remove the idle time ranked below")


def _exposed_layer(s: dict) -> Advice | None:
    """The host layer that caused the most device idle time."""
    causes = {k: v for k, v in (s.get("idle_by_cause_us") or {}).items() if k in CAUSE_TARGETS and v}
    if not causes or not s.get("device_idle_us"):
        return None
    cause = max(causes, key=causes.get)
    share = 100.0 * causes[cause] / s["device_idle_us"]
    target, label = CAUSE_TARGETS[cause]
    action = _TARGETS[target][1] if target else ACTIONS[cause]
    ranked = ", ".join(f"{k} {v:,.0f} µs" for k, v in sorted(causes.items(), key=lambda kv: -kv[1])[:4])
    return Advice(f"the device waited longest on {label}: {causes[cause]:,.1f} µs, {share:.0f}% of its idle "
                  f"time (exposed, by cause: {ranked})", action)


def _stall(summary: dict) -> Advice | None:
    """The frames that held the host stalls (meta ``host_stall_frames``), when there were any."""
    frames = (summary.get("meta") or {}).get("host_stall_frames") or []
    if not frames:
        return None
    total = sum(f["us"] for f in frames)
    named = ", ".join(f"{f['frame']} {f['us']:,.0f} µs ({f['stalls']}×)" for f in frames[:3])
    return Advice(f"host stalls held the threads for {total:,.1f} µs (top frames: {named}); they are not "
                  "per-op framework overhead", ACTIONS["host_stall"])


def _dominant(s: dict) -> Advice:
    parts = {key: s.get(key) for key in (FT, CT, FLOOR) if s.get(key) is not None}
    total = s["orchestration_us"] or 0.0
    if not parts:
        return Advice(f"T_Orchestrate components are {NOT_MEASURED}", "see the diagnostics")
    key = max(parts, key=parts.get)
    share = 100.0 * parts[key] / total if total else 0.0
    label, action = _TARGETS[key]
    return Advice(f"largest orchestration component (exposed or not): {label}, {share:.0f}% of T_Orchestrate "
                  f"({parts[key]:,.1f} µs of {total:,.1f} µs)", action)
