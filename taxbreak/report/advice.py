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

import re
from dataclasses import dataclass

from ..decompose.host_frames import STALL_FRAME
from .terminal_fit import duration
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
    cause: str | None = None  # the idle cause the finding is about, where it is about one


def advise(summary: dict) -> list[Advice]:
    """Findings for the whole trace (``summary['all']``), most important first.

    One account drives the verdict and the advice: the device's idle time and
    the host layer that caused each idle ns (``idle_by_cause_us``). Layers are
    ranked by the idle time they caused (exposed), not by their raw sums.
    """
    s = summary["all"]
    capture = _capture(summary)
    if capture:  # the steady-state numbers describe a few warm-up kernels: no steady-state advice
        return [capture]
    if not s.get("kernels"):
        return [Advice("no kernels in the trace: the per-kernel split (ΔFT/ΔCT/ΔKT) and HDBI need a "
                       "CUDA device", "profile on a GPU; on this run compare host time per step and "
                       "ATen ops per token between models or versions")]
    out = [_verdict(s)]
    why = hdbi_idle_disagreement(s)
    if why:
        out[0].finding += f". {why}"
    copies = _copy_heavy(s)
    if copies:
        out.append(copies)
    warmup = _warmup(summary.get("warmup"))
    if warmup:
        out.append(warmup)
    exposed = _exposed_layer(s, summary.get("meta") or {}, summary.get("health") or [])
    if exposed and warmup:  # idle time is not split by warm-up: say that it is inside
        exposed = Advice(exposed.finding + "; this includes the idle time of the warm-up calls above", exposed.action,
                         exposed.cause)
    if exposed and exposed.cause and (_idle_share(s) or 100.0) < DEVICE_BOUND_IDLE_PCT:
        # device-bound: the host layer is still named, with how little there is to win
        exposed = Advice(exposed.finding, f"only worth it after the kernels (the device is busy; removing all of "
                         f"this idle time saves at most {_us(s['device_idle_us'])} summed over devices): "
                         + exposed.action, exposed.cause)
    if exposed:
        out.append(exposed)
    stall = _stall(summary)
    if stall:
        out.append(stall)
    out.append(_dominant(s, summary.get("warmup") if warmup else None))
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
    "dependency_wait": (None, "dependencies of issued kernels (stream waits, synchronizes, blocking copies)"),
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
    "dependency_wait": "issued kernels waited on a dependency, not on the launch path: record the event the "
                       "stream waits on earlier, move blocking copies and synchronizes off the launching thread "
                       "or out of the step, or overlap the producing work; fewer launches do not shorten it",
}


CAPTURE_ACTION = ("profile replay steps after capture: start the profiler once the server has captured its "
                  "CUDA graphs (after warm-up, e.g. torch.profiler schedule(wait=…, warmup=…) or the serving "
                  "engine's profiler endpoint during requests); this trace's ΔFT/ΔCT/ΔKT and HDBI describe "
                  "capture, not the workload")


def _capture(summary: dict) -> Advice | None:
    """The trace records CUDA-graph capture rather than execution (``meta.graph_capture.dominant``)."""
    cap = (summary.get("meta") or {}).get("graph_capture") or {}
    if not cap.get("dominant"):
        return None
    return Advice(f"this trace records CUDA-graph capture, not execution: {cap['captured_launches']:,} of "
                  f"{cap['launch_calls']:,} launch calls ({100.0 * cap['captured_share']:.0f}%) were recorded into "
                  f"graphs during {cap['capture_windows']:,} capture window(s) and never ran; only "
                  f"{cap['executed_kernels']:,} kernel(s) executed", CAPTURE_ACTION)


def _idle_share(s: dict) -> float | None:
    devices = s.get("devices") or {}
    wall = s.get("wall_us")
    if not devices or not wall:
        return None
    return 100.0 * sum(d["idle_us"] for d in devices.values()) / (wall * len(devices))


COPY_ACTION = ("cut host↔device copy time: fewer and larger copies (batch small transfers), pinned host memory "
               "(pageable copies are staged and slower), keep data on the device between steps, and overlap the "
               "copies that remain with compute on a side stream (non_blocking=True from pinned memory)")


DEVICE_BOUND_IDLE_PCT = 20.0


def _verdict(s: dict) -> Advice:
    """Device-bound or host-bound, from the device's idle share (HDBI beside it where measured); a device-bound
    trace whose device spent more time copying than computing is copy-bound."""
    idle = _idle_share(s)
    hdbi = s.get("hdbi")
    index = f"HDBI {hdbi:.3f}" if hdbi is not None else f"HDBI {NOT_MEASURED}"
    if idle is None:
        return Advice(f"{index}; device idle time {NOT_MEASURED}", "see the components below")
    queue = s.get("queue_wait_union_us")
    if idle < DEVICE_BOUND_IDLE_PCT:
        copy = _copy_bound(s, idle, index)
        if copy:
            return copy
        return Advice(f"device-bound: the GPU was idle {idle:.0f}% of the elapsed time ({index}); kernels "
                      f"queued behind device work for {_us(queue or 0)}, which is healthy queueing here",
                      "host-side fixes buy little latency; look at the kernels themselves")
    pending = (s.get("idle_by_cause_us") or {}).get("nothing_pending") or 0.0
    host_caused = 100.0 * (1 - pending / s["device_idle_us"]) if s.get("device_idle_us") else 0.0
    return Advice(f"the GPU was idle {idle:.0f}% of the elapsed time ({index}); the host caused "
                  f"{host_caused:.0f}% of that idle time (the rest had no work pending)",
                  "host-side fixes shorten the step where they remove the idle time ranked below")


def _copies_exceed_kernels(s: dict) -> tuple[float, float] | None:
    """(copy busy, kernel busy) µs when copies (memcpy) kept the device busy longer than kernels did."""
    copy, kernel = s.get("device_copy_busy_us"), s.get("device_kernel_busy_us")
    if not copy or kernel is None or copy <= kernel:
        return None
    return copy, kernel


def _copy_bound(s: dict, idle: float, index: str) -> Advice | None:
    """Device-bound, and copies took more device time than kernels: the kernels are not the bottleneck."""
    times = _copies_exceed_kernels(s)
    if times is None:
        return None
    return Advice(f"copy-bound: the GPU was idle {idle:.0f}% of the elapsed time ({index}) and host↔device "
                  f"copies kept it busy {_us(times[0])} against {_us(times[1])} of kernels (unions per kind, "
                  "all devices)", COPY_ACTION)


def _copy_heavy(s: dict) -> Advice | None:
    """A host-bound trace whose busy time is mostly copies: said beside the verdict."""
    times = _copies_exceed_kernels(s)
    idle = _idle_share(s)
    if times is None or idle is None or idle < DEVICE_BOUND_IDLE_PCT:
        return None  # device-bound: the verdict says copy-bound already
    return Advice(f"of the time the GPU was busy, copies took more than kernels: {_us(times[0])} of memcpy "
                  f"against {_us(times[1])} of kernels (unions per kind, all devices)", COPY_ACTION)


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
    analysis window, or HDBI < 0.5 while it was idle less than 20 % (docs/method.md §3.3).
    """
    hdbi, idle = s.get("hdbi"), _idle_share(s)
    if hdbi is None and s.get("hdbi_covered") is not None:  # the index over the kernels it covers
        hdbi = s["hdbi_covered"]
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
    head = (f"{_index_name(s)} {hdbi:.3f} reads device-bound while the GPU was idle {idle:.0f}% of the elapsed time: "
            f"HDBI weighs kernel time against T_Orchestrate ({_us(s.get('orchestration_us'))}) only")
    outside = {k: v for k, v in causes.items() if k not in ORCHESTRATE_CAUSES}
    if not total or not causes:
        return head + "; the idle time by cause is not measured"
    outside_share = 100.0 * sum(outside.values()) / total
    if outside and outside_share >= 50.0:
        cause = max(outside, key=outside.get)
        return (head + f", and {outside_share:.0f}% of the idle time had a cause outside it; the largest is "
                f"{_cause_label(cause)}: {_us(outside[cause])}, {100.0 * outside[cause] / total:.0f}% of the "
                f"idle time")
    inside = {k: v for k, v in causes.items() if k in ORCHESTRATE_CAUSES}
    cause, inside_us, orch = max(inside, key=inside.get), sum(inside.values()), s.get("orchestration_us")
    off_path = (f", {inside_us / orch:.1f}× T_Orchestrate: host work off the kernels' launch paths (before the "
                f"first kernel, between steps), which T_Orchestrate does not count" if orch and inside_us > orch else "")
    return (head + f", while the host layers it counts caused {_us(inside_us)} of idle time "
            f"({100.0 - outside_share:.0f}%){off_path}; the largest is {_cause_label(cause)}: "
            f"{_us(inside[cause])}, {100.0 * inside[cause] / total:.0f}% of the idle time")


def _orchestration_hidden(s: dict, hdbi: float, idle: float) -> str:
    """HDBI low, idle low: T_Orchestrate ran while the device was busy."""
    head = (f"{_index_name(s)} {hdbi:.3f} reads host-bound while the GPU was idle only {idle:.0f}% of the elapsed time: "
            f"T_Orchestrate ({_us(s.get('orchestration_us'))}) is host time per kernel, not time the device "
            f"waited for")
    hidden, exposed = s.get("hidden_orchestration_us"), s.get("exposed_orchestration_us")
    if hidden is None or exposed is None:
        return head + "; host work hidden behind device work is not measured"
    return (head + f"; host work ran {_us(hidden)} while the device was busy (hidden) against {_us(exposed)} "
            f"while it was idle (exposed), summed over threads")


def _index_name(s: dict) -> str:
    """'HDBI', or the coverage-bounded index's name where HDBI itself is not measured."""
    if s.get("hdbi") is not None or s.get("hdbi_coverage") is None:
        return "HDBI"
    return f"HDBI over the {100.0 * s['hdbi_coverage']:.0f}% of launch calls it covers"


def _us(value) -> str:
    """µs, ms or s with at most four digits (terminal_fit.duration); missing is "not measured"."""
    return duration(value, na=NOT_MEASURED)


def _cause_label(cause: str) -> str:
    if cause in OUTSIDE_LABELS:
        return OUTSIDE_LABELS[cause]
    if cause in CAUSE_TARGETS:
        return CAUSE_TARGETS[cause][1]
    return cause.replace("_", " ")


def _exposed_layer(s: dict, meta: dict | None = None, health: list | None = None) -> Advice | None:
    """The host layer that caused the most device idle time (a dependency wait names its calls).

    Advice that rests on an attribution a health check doubts is withheld with the reason, and
    an action the trace shows is already taken (graphs replayed, pinned copies) is not given."""
    causes = {k: v for k, v in (s.get("idle_by_cause_us") or {}).items() if k in CAUSE_TARGETS and v}
    if not causes or not s.get("device_idle_us"):
        return None
    cause = max(causes, key=causes.get)
    share = 100.0 * causes[cause] / s["device_idle_us"]
    target, label = CAUSE_TARGETS[cause]
    if share < MIN_EXPOSED_PCT:  # no host-side layer is worth working on: say so instead of ranking
        return Advice(f"no host-side cause holds a material share of the device's idle time (the largest, "
                      f"{label}, is {share:.1f}%)", NO_MATERIAL_CAUSE, cause)
    action = _already_done(cause, _TARGETS[target][1] if target else ACTIONS[cause], meta or {})
    if cause == "host_stall":
        action = stall_action(meta or {})
    doubt = next((h for h in health or [] if cause in h.get("affected_causes", ())), None)
    if doubt:
        action = (f"advice withheld: the trace's {doubt['check']} check warns ({doubt['detail']}); "
                  f"{doubt['affects']}")
    ranked = ", ".join(f"{k} {_us(v)}" for k, v in sorted(causes.items(), key=lambda kv: -kv[1])[:4])
    return Advice(f"the device waited longest on {label}: {_us(causes[cause])}, {share:.0f}% of its idle "
                  f"time (exposed, by cause: {ranked}){_waited_on(cause, meta or {})}", action, cause)


MIN_EXPOSED_PCT = 10.0  # below this share of idle time a host layer is not named as the target
NO_MATERIAL_CAUSE = ("the idle time is not host-caused (see the causes: nothing pending, unlinked work): shorten "
                     "the profiled window to the workload, or give the device more work per step")
GRAPHS_REPLAYED = ("the trace already replays CUDA graphs ({n:,} graph launches): fuse the kernels inside "
                   "them or capture more of the step into the graph")
PINNED_ALREADY = ("the copies already move pinned host memory: keep them off streams that wait on other work "
                  "and issue them earlier")


def _already_done(cause: str, action: str, meta: dict) -> str:
    """``action`` without what the trace shows is done already."""
    if "CUDA Graphs" in action and (meta.get("graph_launch_calls") or 0) > 0:
        return GRAPHS_REPLAYED.format(n=meta["graph_launch_calls"])
    if cause == "copy_issued" and meta.get("copies") and not meta.get("pageable_copies"):
        return PINNED_ALREADY
    return action


def _waited_on(cause: str, meta: dict) -> str:
    """'; waited on: call µs (n kernels), …' for the dependency-wait cause (meta ``dependency_waits``)."""
    waits = meta.get("dependency_waits") or []
    bounds = meta.get("launch_latency_bound_us") or {}
    if cause == "launch_latency" and bounds and all(b is None for b in bounds.values()):
        return ("; no launch-latency bound could be learned from this trace (fewer than 20 launches onto an idle "
                "device), so part of it may be a wait on a dependency")
    if cause != "dependency_wait" or not waits:
        return ""
    bounds = meta.get("launch_latency_bound_us") or {}
    bound = ", ".join(f"device {d}: {_us(b)}" for d, b in bounds.items() if b is not None)
    calls = ", ".join(f"{w['call']} {_us(w['us'])} ({w['kernels']} kernels)" for w in waits[:3])
    return f"; waited on: {calls}; plausible launch latency learned from this trace: {bound}"


WARMUP_SHARE = 0.5  # warm-up carrying at least half of T_Orchestrate makes the trace a warm-up trace
WARMUP_ACTION = ("profile after warm-up: run a few iterations before the profiler starts (torch.profiler "
                 "schedule(wait=…, warmup=…, active=…)) so lazy loading, handle creation and cudnn.benchmark "
                 "autotuning stay outside the window; the steady-state target below sets the warm-up calls aside")


def _warmup(w: dict | None) -> Advice | None:
    """First calls (one-time initialisation) carry a large share of T_Orchestrate."""
    share = (w or {}).get("orchestration_share")
    if share is None or share < WARMUP_SHARE:
        return None
    names = ", ".join(op["op_name"] for op in w["ops"][:4])
    ct = w.get("library_share")
    ct_text = f", {100.0 * ct:.0f}% of ΔCT" if ct is not None else ""
    return Advice(f"warm-up inside the profiled window: {w['calls']} first call(s) ({names}) took "
                  f"{_us(w['host_us'])} of host time and carry {100.0 * share:.0f}% of T_Orchestrate{ct_text}; "
                  "that is one-time initialisation, not steady-state cost", WARMUP_ACTION)


def _stall(summary: dict) -> Advice | None:
    """The frames whose host stalls kept the GPU idle (meta ``host_stall_frames``), ranked by that idle
    time; stalls the device never waited for (a main thread inside ``## backward ##`` while another
    thread launches) are no finding."""
    frames = [f for f in _frames_by_idle(summary.get("meta") or {}) if f["idle_us"]]
    if not frames:
        return None
    idle = sum(f["idle_us"] for f in frames)
    named = ", ".join(f"{f['frame']} {_us(f['us'])} of host time, {_us(f['idle_us'])} of GPU idle "
                      f"({f['stalls']}×)" for f in frames[:3])
    return Advice(f"host stalls kept the GPU idle for {_us(idle)} (summed over devices; top frames: {named}); "
                  "they are not per-op framework overhead", stall_action(summary.get("meta") or {}))


def _frames_by_idle(meta: dict) -> list[dict]:
    """Stall frames, the ones that kept the GPU idle longest first (then by host time)."""
    return sorted(meta.get("host_stall_frames") or [], key=lambda f: (-(f.get("idle_us") or 0.0), -f["us"]))


INIT_FRAME = re.compile(r"(?i)mpi_init|cuinit|cudainit|init_process_group|__init__|_initialize|import|load_state|"
                        r"from_pretrained|cuda_init|lazy_init")
INIT_STALL_ACTION = ("the largest stall is one-time initialisation ({frame}): leave it out of the profiled window "
                     "(start the profiler after set-up, or with a schedule that skips the first steps)")


UNTRACED_STALL_ACTION = ("the stalls are untraced host time: profile with Python frames (with_stack) or NVTX ranges "
                         "to see what the thread did, then take it off the GPU's critical path or out of the step")
OTHER_STALL_ACTION = ("a long host piece inside {frame}: take it off the GPU's critical path (overlap it with device "
                      "work, move it out of the step) or leave it out of the profiled window; per-op work "
                      "(torch.compile) does not shorten it")


def stall_action(meta: dict) -> str:
    """The stall action for the named frame that kept the GPU idle longest: initialisation is left out of
    the window, data loading and preprocessing get loader advice, any other frame is taken off the
    critical path; with only untraced stalls, the advice is to trace what the thread did."""
    named = [f for f in _frames_by_idle(meta) if f["frame"] != "(untraced)"]
    if not named:
        return UNTRACED_STALL_ACTION if meta.get("host_stall_frames") else ACTIONS["host_stall"]
    frame = named[0]["frame"]
    if INIT_FRAME.search(frame):
        return INIT_STALL_ACTION.format(frame=frame)
    if STALL_FRAME.search(frame):
        return ACTIONS["host_stall"]
    return OTHER_STALL_ACTION.format(frame=frame)


def _dominant(s: dict, warmup: dict | None = None) -> Advice:
    """The largest orchestration component; with warm-up set aside when it dominates (``warmup``)."""
    parts = {key: s.get(key) for key in (FT, CT, FLOOR) if s.get(key) is not None}
    if s.get("orchestration_us") is None:
        return _unmeasured_orchestration(s, parts)
    total = s["orchestration_us"]
    scope = "exposed or not"
    if warmup:  # steady state: what the kernels outside the warm-up calls carry
        parts = {key: value - (warmup.get(key) or 0.0) for key, value in parts.items()}
        total -= warmup.get("orchestration_us") or 0.0
        scope = "exposed or not, warm-up calls set aside"
    key = max(parts, key=parts.get)
    share = 100.0 * parts[key] / total if total else 0.0
    label, action = _TARGETS[key]
    return Advice(f"largest orchestration component ({scope}): {label}, {share:.0f}% of T_Orchestrate "
                  f"({_us(parts[key])} of {_us(total)})", action)


def _unmeasured_orchestration(s: dict, parts: dict) -> Advice:
    """T_Orchestrate has a missing component: no ranking of its parts (a share of a partial sum would
    mislead; the launch floor alone says nothing about the layers above it)."""
    missing = [label.split(" (")[0] for key, (label, _) in _TARGETS.items() if key not in parts]
    if not parts.get(FT) and not parts.get(CT):
        return Advice(f"advice on the orchestration layers withheld: {', '.join(missing)} not measured, and the "
                      "launch floor alone does not say which layer costs most",
                      "capture with the PyTorch profiler (with_stack) or Nsight with --pytorch=autograd-nvtx so "
                      "the kernels link to their framework ops")
    measured = ", ".join(f"{_TARGETS[key][0].split(' (')[0]} {_us(value)}" for key, value in parts.items())
    return Advice(f"T_Orchestrate not measured ({', '.join(missing)} missing); measured components: {measured}",
                  "no layer is ranked on a partial sum: see the idle causes above for what the device waited on")


def top_idle_cause(s: dict) -> str:
    """The largest measured idle cause of one scope, with its µs and share of the device's idle
    time ("n/a" with the reason where idle is not measured)."""
    causes = {k: v for k, v in (s.get("idle_by_cause_us") or {}).items() if v}
    if not causes or not s.get("device_idle_us"):
        return f"{NOT_MEASURED}: no device idle time in the trace"
    cause = max(causes, key=causes.get)
    return f"{cause} {_us(causes[cause])} ({100.0 * causes[cause] / s['device_idle_us']:.0f}%)"
