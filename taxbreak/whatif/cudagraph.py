"""Measure a decode step replayed from a CUDA graph beside the same step run eagerly.

Runs only with a CUDA device; elsewhere it says so and measures nothing.

Method: build the run's model and shape, prefill the prompt, then time the
same decode step (same cache length, same token) many times, each timing
ending with a device sync so it is the step's latency as the host sees it:

* eager: ``model(token, cache)`` per step;
* graph: the step captured once with ``torch.cuda.graph`` and replayed with
  ``CUDAGraph.replay()`` (static input and cache tensors, as a serving engine's
  decode graphs use).

The cache is restored between steps by putting back the per-layer K/V lists
(``KVCache`` grows by ``torch.cat``, which makes new tensors), so every timed
step sees the same shapes and no copy kernel is timed.
"""
from __future__ import annotations

import statistics
import time

import torch

NO_CUDA = "not measured: no CUDA device"


def measure_decode_graph(model: str, batch: int, seq_len: int, *, tiny: bool | None = None,
                         dtype: str | None = None, iters: int = 50, warmup: int = 5, seed: int = 0) -> dict:
    """Median eager and graph-replayed decode step latency (µs) of one model shape.

    Returns:
        ``{"measured": True, "eager_step_us": .., "graph_step_us": .., "speedup": .., "iters": ..}``,
        or ``{"measured": False, "reason": ...}`` without CUDA or when the step
        cannot be captured (the reason names the error).
    """
    if not torch.cuda.is_available():
        return {"measured": False, "reason": NO_CUDA}
    if not model or model.startswith("hf:"):
        return {"measured": False, "reason": f"not measured: only built-in presets are rebuilt, got {model!r}"}
    from ..capture.models import build_model

    module = build_model(model, tiny=bool(tiny), dtype=dtype, device="cuda", seed=seed)
    vocab = module.spec.vocab
    gen = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, vocab, (batch, seq_len), generator=gen).cuda()
    with torch.inference_mode():
        logits, cache = module(prompt, logits_to_keep=1)
        token = logits[:, -1].argmax(-1, keepdim=True).contiguous()
    saved = (list(cache.keys), list(cache.values))

    def fresh():
        cache.keys[:], cache.values[:] = list(saved[0]), list(saved[1])
        return cache

    eager = _time_steps(lambda: module(token, cache=fresh(), logits_to_keep=1), iters, warmup)
    try:
        replay = _capture(module, token, fresh)
    except RuntimeError as err:  # ops that sync or allocate on the host cannot be captured
        return {"measured": False, "reason": f"capture failed: {err}", "eager_step_us": statistics.median(eager)}
    graph = _time_steps(replay, iters, warmup)
    fresh()
    eager_us, graph_us = statistics.median(eager), statistics.median(graph)
    return {"measured": True, "eager_step_us": eager_us, "graph_step_us": graph_us,
            "speedup": eager_us / graph_us if graph_us > 0 else None, "iters": iters,
            "device": torch.cuda.get_device_name(), "method": "median wall time per step, device-synced"}


def _time_steps(step, iters: int, warmup: int) -> list[float]:
    times_us = []
    with torch.inference_mode():
        for i in range(warmup + iters):
            torch.cuda.synchronize()
            start = time.perf_counter_ns()
            step()
            torch.cuda.synchronize()
            if i >= warmup:
                times_us.append((time.perf_counter_ns() - start) / 1e3)
    return times_us


def _capture(module, token, fresh):
    """Capture one decode step; return a callable that replays it."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.inference_mode(), torch.cuda.stream(stream):
        for _ in range(3):  # warm up on a side stream, as torch.cuda.graph requires
            module(token, cache=fresh(), logits_to_keep=1)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.inference_mode(), torch.cuda.graph(graph):
        module(token, cache=fresh(), logits_to_keep=1)
    return graph.replay
