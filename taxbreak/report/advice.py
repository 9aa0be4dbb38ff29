"""What to do about it: the next optimization target, read off one summary.

The rules follow the diagnostic guidance published with TaxBreak (arXiv
2603.12465; docs/method.md): the *largest* orchestration component names the
layer to work on — framework translation (ΔFT) and CUDA-library translation
(ΔCT) point at the software stack (e.g. ``torch.compile``), the launch floor
N·T_sys at the kernel count (fusion, CUDA Graphs), a large launch residual at
the driver/runtime path or queueing. No HDBI threshold is used: the paper
defines none. Whether fixing it pays is read from the exposed/hidden split of
the host partition: only orchestration the device waited for costs latency.
"""
from __future__ import annotations

from dataclasses import dataclass

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
    """Findings for the whole trace (``summary['all']``), most important first."""
    s = summary["all"]
    if s.get("orchestration_us") is None:
        return [Advice("no kernels in the trace: the per-kernel split (ΔFT/ΔCT/ΔKT) and HDBI need a "
                       "CUDA device", "profile on a GPU; on this run compare host time per step and "
                       "ATen ops per token between models or versions")]
    out = [_dominant(s)]
    residual = _residual(s)
    if residual:
        out.append(residual)
    exposure = _exposure(s)
    if exposure:
        out.append(exposure)
    sync = _sync(s) if _exposed_share(s) >= 50.0 else None  # waits while device-bound are expected
    if sync:
        out.append(sync)
    return out


def _dominant(s: dict) -> Advice:
    parts = {key: s.get(key) or 0.0 for key in (FT, CT, FLOOR)}
    total = s["orchestration_us"] or 0.0
    key = max(parts, key=parts.get)
    share = 100.0 * parts[key] / total if total else 0.0
    label, action = _TARGETS[key]
    return Advice(f"largest orchestration component: {label}, {share:.0f}% of T_Orchestrate "
                  f"({parts[key]:,.1f} µs of {total:,.1f} µs)", action)


def _residual(s: dict) -> Advice | None:
    residual, floor = s.get("launch_latency_us"), s.get(FLOOR)
    if not residual or not floor or residual <= floor:
        return None
    return Advice(f"launch path above the floor (ΔKT residual {residual:,.1f} µs) exceeds N·T_sys "
                  f"({floor:,.1f} µs): kernels wait in the launch queue or the driver path is slow",
                  "look for queueing behind long kernels and for synchronizing calls; an isolation "
                  "replay (`taxbreak replay`) separates queueing from launch cost")


def _exposed_share(s: dict) -> float:
    """Percent of host work that ran while the device was idle (0 when unknown)."""
    exposed, hidden = s.get("exposed_orchestration_us"), s.get("hidden_orchestration_us")
    if exposed is None or hidden is None or exposed + hidden <= 0:
        return 0.0
    return 100.0 * exposed / (exposed + hidden)


def _exposure(s: dict) -> Advice | None:
    if s.get("exposed_orchestration_us") is None or s.get("hidden_orchestration_us") is None:
        return None
    share = _exposed_share(s)
    if share >= 50.0:
        return Advice(f"{share:.0f}% of host work ran while the device was idle: host overhead is on the "
                      "critical path", "host-side fixes shorten the step")
    return Advice(f"only {share:.0f}% of host work ran while the device was idle: most orchestration is "
                  "hidden behind device work", "host-side fixes buy little latency here; look at the "
                  "kernels themselves")


def _sync(s: dict) -> Advice | None:
    sync, wall = s.get("host_sync_us"), s.get("host_thread_us")
    if not sync or not wall or sync < 0.1 * wall:
        return None
    return Advice(f"the host spends {100.0 * sync / wall:.0f}% of its wall time waiting in synchronize calls",
                  "remove device→host syncs from the step (.item(), .cpu(), data-dependent shapes)")
