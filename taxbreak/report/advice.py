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
    why = hdbi_idle_disagreement(s)
    if why:
        out[0].finding += f". {why}"
    exposed = _exposed_layer(s)
    if exposed:
        out.append(exposed)
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


# HDBI reads device-bound at or above this value, host-bound below it (a reading, not a threshold of
# the method: it only decides when the verdict has to say why HDBI and the idle share disagree)
HDBI_DEVICE_SIDE = 0.5
IDLE_HIGH_PCT, IDLE_LOW_PCT = 50.0, 20.0
# idle causes that are host work of the layers T_Orchestrate counts (ΔFT, ΔCT, ΔKT); every other
# cause (nothing pending, launch latency, copies, sync, unlinked work, ...) lies outside it
ORCHESTRATE_CAUSES = ("python", "dispatch", "library", "launch_api", "launch_floor")
OUTSIDE_LABELS = {
    "nothing_pending": "nothing pending (no device work left to run: the host ran on after the last kernel)",
    "launch_latency": "launch latency above the floor (reported apart from T_Orchestrate)",
}


def hdbi_idle_disagreement(s: dict) -> str | None:
    """Why HDBI and the device's idle share disagree, in words from the numbers of one scope;
    ``None`` where they agree or either is not measured.

    They disagree when HDBI ≥ 0.5 (device side) while the device was idle more than 50 % of the
    analysis window, or HDBI < 0.5 while it was idle less than 20 % (docs/method.md §3.2).
    """
    hdbi, idle = s.get("hdbi"), _idle_share(s)
    if hdbi is None or idle is None:
        return None
    if hdbi >= HDBI_DEVICE_SIDE and idle > IDLE_HIGH_PCT:
        return _idle_outside_orchestration(s, hdbi, idle)
    if hdbi < HDBI_DEVICE_SIDE and idle < IDLE_LOW_PCT:
        return _orchestration_hidden(s, hdbi, idle)
    return None


def _idle_outside_orchestration(s: dict, hdbi: float, idle: float) -> str:
    """HDBI high, idle high: the idle time is not the host time that T_Orchestrate counts."""
    causes = {k: v for k, v in (s.get("idle_by_cause_us") or {}).items() if v}
    total = s.get("device_idle_us") or sum(causes.values())
    head = (f"HDBI {hdbi:.3f} reads device-bound while the GPU was idle {idle:.0f}% of the elapsed time: "
            f"HDBI weighs kernel time against T_Orchestrate ({_us(s.get('orchestration_us'))}) only")
    outside = {k: v for k, v in causes.items() if k not in ORCHESTRATE_CAUSES}
    if not total or not causes:
        return head + "; the idle time by cause is not measured"
    outside_share = 100.0 * sum(outside.values()) / total
    if outside and outside_share >= 50.0:
        cause = max(outside, key=outside.get)
        return (head + f", and {outside_share:.0f}% of the idle time had a cause outside it; the largest is "
                f"{_cause_label(cause)}: {outside[cause]:,.1f} µs, {100.0 * outside[cause] / total:.0f}% of the "
                f"idle time")
    inside = {k: v for k, v in causes.items() if k in ORCHESTRATE_CAUSES}
    cause, inside_us, orch = max(inside, key=inside.get), sum(inside.values()), s.get("orchestration_us")
    off_path = (f", {inside_us / orch:.1f}× T_Orchestrate: host work off the kernels' launch paths (before the "
                f"first kernel, between steps), which T_Orchestrate does not count" if orch and inside_us > orch else "")
    return (head + f", while the host layers it counts caused {inside_us:,.1f} µs of idle time "
            f"({100.0 - outside_share:.0f}%){off_path}; the largest is {_cause_label(cause)}: "
            f"{inside[cause]:,.1f} µs, {100.0 * inside[cause] / total:.0f}% of the idle time")


def _orchestration_hidden(s: dict, hdbi: float, idle: float) -> str:
    """HDBI low, idle low: T_Orchestrate ran while the device was busy."""
    head = (f"HDBI {hdbi:.3f} reads host-bound while the GPU was idle only {idle:.0f}% of the elapsed time: "
            f"T_Orchestrate ({_us(s.get('orchestration_us'))}) is host time per kernel, not time the device "
            f"waited for")
    hidden, exposed = s.get("hidden_orchestration_us"), s.get("exposed_orchestration_us")
    if hidden is None or exposed is None:
        return head + "; host work hidden behind device work is not measured"
    return (head + f"; host work ran {_us(hidden)} while the device was busy (hidden) against {_us(exposed)} "
            f"while it was idle (exposed), summed over threads")


def _us(value) -> str:
    return NOT_MEASURED if value is None else f"{value:,.1f} µs"


def _cause_label(cause: str) -> str:
    if cause in OUTSIDE_LABELS:
        return OUTSIDE_LABELS[cause]
    if cause in CAUSE_TARGETS:
        return CAUSE_TARGETS[cause][1]
    return cause.replace("_", " ")


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
