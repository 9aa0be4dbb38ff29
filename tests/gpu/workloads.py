"""Tiny CPU workloads profiled with record_shapes, and their op records.

``host_tables(path)`` turns the ``cpu_op`` events of a Kineto JSON into a
canonical ``host_events`` table the way the Kineto reader does (the four
record lists as JSON text), so the harness tests do not depend on the reader
being installed; when ``taxbreak.readers.load_trace`` exists it is used.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, record_function

from taxbreak.trace.tables import TraceTables

from .planted import table

# top-level op -> expected output shape of the ops the workload calls directly
EXPECTED_SHAPES = {
    "aten::linear": [[4, 16]], "aten::bmm": [[2, 4, 5]], "aten::softmax": [[4, 16]],
    "aten::silu": [[4, 8]], "aten::gelu": [[4, 8]], "aten::embedding": [[3, 8]],
    "aten::topk": [[4, 3], [4, 3]], "aten::rsqrt": [[4, 1]], "aten::scatter": [[4, 8]],
    "aten::matmul": [[4, 16]], "aten::stack": [[2, 4, 8]], "aten::gather": [[4, 3]],
}


def pieces_workload() -> None:
    """linear/matmul/bmm/softmax/silu/gelu/RMS-norm pieces/embedding/cat/index/topk/scatter/..."""
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(4, 8, generator=g), torch.randn(16, 8, generator=g)
    idx = torch.tensor([0, 2, 1])
    y = F.linear(x, w)
    torch.matmul(x, w.t())
    torch.bmm(torch.randn(2, 4, 3, generator=g), torch.randn(2, 3, 5, generator=g))
    p = torch.softmax(y, dim=-1)
    F.silu(x), F.gelu(x)
    F.embedding(idx, w)
    torch.cat([x, x], dim=0), torch.stack([x, x])
    vals, ids = torch.topk(p, 3, dim=-1)
    torch.gather(p, 1, ids)
    x.scatter(0, torch.zeros(4, 8, dtype=torch.long), 1.0)
    x.index_select(0, idx), x[idx], x[:, 1:3].contiguous()
    x.index_add(0, idx, torch.ones(3, 8))
    var = x.pow(2).mean(-1, keepdim=True)  # RMS norm, the eager pieces
    torch.rsqrt(var + 1e-6) * x
    F.rms_norm(x, (8,))
    F.scaled_dot_product_attention(torch.randn(1, 2, 4, 8, generator=g), torch.randn(1, 2, 4, 8, generator=g),
                                   torch.randn(1, 2, 4, 8, generator=g), is_causal=True)
    torch.where(x > 0, x, 0.0), x.masked_fill(x > 0, 0.5), x.to(torch.bfloat16), (x * 2).sum(0)
    torch.argmax(p, dim=-1), torch.nonzero(x > 0), x.transpose(0, 1).reshape(-1)


def profile_to(path: Path, fn) -> Path:
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with record_function("taxbreak/prefill/0"):
            with torch.no_grad():
                fn()
    prof.export_chrome_trace(str(path))
    return path


def host_tables(path: Path) -> TraceTables:
    """Canonical tables of a CPU Kineto trace (reader if installed, else cpu_op events)."""
    try:
        from taxbreak.readers import load_trace
    except ImportError:
        load_trace = None
    if load_trace is not None:
        return load_trace(path)
    events = json.loads(Path(path).read_text())["traceEvents"]
    rows = []
    for ev in events:
        if ev.get("cat") != "cpu_op":
            continue
        args = ev.get("args", {})
        rows.append({"pid": int(ev["pid"]), "tid": int(ev["tid"]), "kind": "op", "name": ev["name"],
                     "start_ns": int(float(ev["ts"]) * 1000), "dur_ns": int(float(ev.get("dur", 0)) * 1000),
                     **{col: json.dumps(args[key]) if key in args else None for col, key in (
                         ("input_dims", "Input Dims"), ("input_types", "Input type"),
                         ("input_strides", "Input Strides"), ("concrete_inputs", "Concrete Inputs"))}})
    return TraceTables(host_events=table("host_events", rows))
