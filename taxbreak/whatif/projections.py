"""What-if projections from one measured mean step: CUDA graphs and a faster host CPU.

Inputs are mean-step metric dicts (:func:`taxbreak.whatif.metrics.step_means`),
µs, keys of docs/method.md. Every projection returns a plain dict that states
its model (``model``), its assumptions (``assumptions``) and, where a value
cannot be projected, ``None`` with the reason (``not_projected``).

CUDA graphs (decode). Eager decode pays, per kernel, framework translation
(ΔFT), library translation (ΔCT) and the launch path (T_sys floor + residual).
A captured graph replays all kernels of the step from one ``cudaGraphLaunch``:

    T_graph = max(T_DeviceActive, T_host_rest + T_graph_launch)
    T_host_rest = max(0, T_host − T_Orchestrate − ΣΔKT_residual)

Faster host CPU (single-thread speed ratio s). Host components scale by 1/s;
only the *exposed* orchestration (host time the device waits on) reaches the
step latency; hidden orchestration overlapped with device work does not:

    T_Orch' = T_Orch / s
    T_step' = T_step − T_Orch,exposed·(1 − 1/s)
"""
from __future__ import annotations

from ..decompose.graph_cost import split_projection

# TaxBreak abstract (arXiv 2603.12465): a faster host CPU cut orchestration by
# 10–29% and end-to-end latency by up to 14% (H200 box vs H100 box).
PUBLISHED_ORCH_REDUCTION_PCT = (10.0, 29.0)
PUBLISHED_E2E_REDUCTION_MAX_PCT = 14.0

def host_time(metrics: dict) -> tuple[float | None, str]:
    """Host busy time of the mean step and where it came from.

    The host partition splits the step's wall time on the host into Python,
    dispatch, library, launch API, sync, other API and untraced time; the time
    the host works is the wall time less the time it waits in device syncs.
    Falls back to the step span when the partition is absent: an upper bound,
    since the span also counts host waits on the device.
    """
    wall, sync = metrics.get("host_thread_us"), metrics.get("host_sync_us")
    if wall is not None:
        busy = float(wall) - float(sync or 0.0)
        marker = metrics.get("wall_us")
        # The partition sums every host thread (a Python-tracer lane can
        # mirror the main thread), while the step loop runs on one thread:
        # its busy time cannot exceed the step marker's wall time.
        if marker is not None and busy > marker:
            return float(marker), "host_thread_us - host_sync_us, capped at the step marker's wall time"
        return busy, "host_thread_us - host_sync_us"
    span = metrics.get("step_us")
    return (None, "none") if span is None else (float(span), "step_us (upper bound: includes host waits)")


def project_cuda_graphs(metrics: dict, floor_us: float | None, floor_source: str, graph_launch_us: float | None = None,
                        launch_fit: dict | None = None) -> dict:
    """Projected decode step latency when the whole step is replayed from one CUDA graph.

    Args:
        metrics: mean decode step (µs).
        floor_us: the launch floor T_sys the analysis used.
        floor_source: where ``floor_us`` came from (``measured``, ``published:H200``, ...).
        graph_launch_us: cost of one ``cudaGraphLaunch``; default: ``launch_fit``, else one T_sys.
        launch_fit: the trace's fitted graph launch cost (``graph_launch_cost.devices[d]``,
            docs/serving.md §3): the launch of the step's graph costs ``a + b·kernels``.

    Returns:
        Dict with ``eager_step_us``, ``host_rest_us``, ``graph_launch_us``,
        ``projected_step_us``, ``speedup`` (``None`` where not projectable), the
        model and assumptions.
    """
    host_us, host_key = host_time(metrics)
    orch = metrics.get("orchestration_us")
    residual = metrics.get("launch_latency_us") or 0.0
    launch_us, launch_source = _graph_launch(graph_launch_us, floor_us, floor_source, launch_fit,
                                             metrics.get("kernels"))
    rest = None if host_us is None or orch is None else max(0.0, host_us - orch - residual)
    out = {
        "model": "T_graph = max(T_DeviceActive, T_host_rest + T_graph_launch); "
        "T_host_rest = max(0, T_host - T_Orchestrate - launch residual)",
        "assumptions": [
            "every kernel of the decode step is captured in one graph (no host syncs, static shapes)",
            f"T_host taken from {host_key}",
            _launch_assumption(launch_us, launch_source),
            "device time is unchanged by graph replay (same kernels)",
        ],
        "eager_step_us": metrics.get("step_us"),
        "device_active_us": metrics.get("device_active_us"),
        "orchestration_us": orch,
        "host_rest_us": rest,
        "graph_launch_us": launch_us,
        "projected_step_us": None,
        "speedup": None,
        "not_projected": None,
        "validation": "compare with the graph-replay measurement (taxbreak whatif --measure-graphs, CUDA only)",
        "split": _split(launch_fit, metrics),
    }
    return _finish_graph_projection(out)


def _split(fit: dict | None, metrics: dict) -> list[dict]:
    """The step's graph in k pieces whose launches overlap earlier pieces' device work
    (docs/serving.md §3); empty without a fitted launch cost or a kernel count."""
    kernels, device = metrics.get("kernels"), metrics.get("device_active_us")
    if not fit or fit.get("a_us") is None or not kernels or device is None:
        return []
    return split_projection(fit["a_us"], fit["b_us_per_node"], kernels, device)


def _graph_launch(given_us: float | None, floor_us: float | None, floor_source: str, fit: dict | None = None,
                  kernels: float | None = None) -> tuple[float | None, str]:
    if given_us is not None:
        return float(given_us), f"{given_us:.2f} µs (given)"
    if fit and fit.get("a_us") is not None and kernels:
        us = fit["a_us"] + fit["b_us_per_node"] * kernels
        return float(us), (f"{us:.2f} µs = {fit['a_us']:.2f} µs + {fit['b_us_per_node']:.3f} µs × {kernels:,.0f} "
                           f"nodes (fitted on this trace's {fit['launches']} graph launches)")
    if floor_us is None:
        return None, "no launch floor"
    return float(floor_us), f"one null-kernel launch floor T_sys = {floor_us:.2f} µs ({floor_source})"


def _launch_assumption(launch_us: float | None, launch_source: str) -> str:
    if launch_us is None:
        return ("the cost of one graph launch is not measured (no launch floor in the trace; "
                "--graph-launch-us gives it)")
    if "fitted" in launch_source:
        return f"the step's graph launch costs {launch_source}"
    return f"one graph launch costs {launch_source}; real launches grow with node count, so this is a lower bound"


def _finish_graph_projection(out: dict) -> dict:
    device, rest, launch = out["device_active_us"], out["host_rest_us"], out["graph_launch_us"]
    if device is None:
        out["not_projected"] = "no device activity in the trace (CPU run): CUDA graphs need a CUDA device"
    elif rest is None or launch is None:
        out["not_projected"] = "host time, orchestration or launch floor not measured"
    else:
        out["projected_step_us"] = max(device, rest + launch)
        eager = out["eager_step_us"]
        out["speedup"] = eager / out["projected_step_us"] if eager and out["projected_step_us"] > 0 else None
    return out


def project_cpu_speedup(metrics: dict, speedup: float) -> dict:
    """Projected orchestration and step latency on a host with single-thread speed ratio ``speedup``.

    Args:
        metrics: mean step of one phase (µs).
        speedup: s > 0; 1.2 = a host 20% faster single-threaded.

    Returns:
        Dict with ``orchestration_us`` → ``projected_orchestration_us``,
        ``step_us`` → ``projected_step_us``, the reductions in percent, where
        they fall against the published range, the model and assumptions.
    """
    if speedup <= 0:
        raise ValueError("speedup must be > 0")
    gain = 1.0 - 1.0 / speedup
    span = metrics.get("step_us")
    cpu_only = metrics.get("device_active_us") is None
    orch, orch_source = _host_cost(metrics, cpu_only)
    exposed, how = _exposed_host(metrics, cpu_only)
    out = {
        "model": "T_Orch' = T_Orch/s; T_step' = T_step - T_exposed*(1 - 1/s)",
        "speedup": speedup,
        "assumptions": [
            "all host components (framework, library, launch path) scale with single-thread speed",
            "device time and the device-side queue are unchanged",
            how,
            f"T_Orch from {orch_source}",
        ],
        "orchestration_us": orch,
        "projected_orchestration_us": None if orch is None else orch / speedup,
        "orchestration_reduction_pct": None if orch is None else 100.0 * gain,
        "exposed_us": exposed,
        "step_us": span,
        "projected_step_us": None,
        "step_reduction_pct": None,
    }
    if span is not None and exposed is not None and span > 0:
        out["projected_step_us"] = span - exposed * gain
        out["step_reduction_pct"] = 100.0 * exposed * gain / span
    out["published"] = compare_published(out["orchestration_reduction_pct"], out["step_reduction_pct"])
    out["validation"] = ("not validated: a check needs the same workload measured on two hosts of different "
                         "single-thread speed; the reference is the published H100-host vs H200-host comparison")
    return out


def _host_cost(metrics: dict, cpu_only: bool) -> tuple[float | None, str]:
    orch = metrics.get("orchestration_us")
    if orch is not None or not cpu_only:
        return orch, "orchestration_us (ΣΔFT + ΣΔCT + N·T_sys)"
    # A CPU run has no kernels, so per-kernel orchestration is undefined; the
    # whole step is host work, and that is what a faster host would shorten.
    return metrics.get("step_us"), "the step's wall time (CPU run: no kernels, per-kernel orchestration undefined)"


def _exposed_host(metrics: dict, cpu_only: bool) -> tuple[float | None, str]:
    if cpu_only:
        # No device: nothing overlaps the host, the whole step is exposed host time.
        return metrics.get("step_us"), "CPU-only run: no device time, the whole step is exposed host time"
    exposed = metrics.get("exposed_orchestration_us")
    return exposed, "only exposed orchestration shortens the step; hidden orchestration stays hidden"


def compare_published(orch_pct: float | None, step_pct: float | None) -> dict:
    """Where projected reductions fall against TaxBreak's published 10–29% / ≤14%."""
    low, high = PUBLISHED_ORCH_REDUCTION_PCT

    def where(value: float | None, lo: float, hi: float) -> str | None:
        if value is None:
            return None
        return "below" if value < lo else ("above" if value > hi else "within")

    return {
        "orchestration_reduction_pct": [low, high],
        "e2e_reduction_max_pct": PUBLISHED_E2E_REDUCTION_MAX_PCT,
        "orchestration": where(orch_pct, low, high),
        "e2e": where(step_pct, 0.0, PUBLISHED_E2E_REDUCTION_MAX_PCT),
        "source": "TaxBreak abstract, arXiv 2603.12465 (H200 host vs H100 host)",
    }
