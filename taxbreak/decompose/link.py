"""The chain of each kernel: torch op → ATen op → launch API call → device activity.

* device ↔ launch: equal ``(process, correlation)``; one launch may feed many
  device activities (a CUDA-graph replay shares one correlation id).
* launch → ATen op: the ATen op named by the launch's ``external_id`` when it
  is on the same thread and encloses the launch; otherwise the innermost
  ``aten::`` host op on the same thread that encloses the launch start.
* ATen op → torch op: the innermost Python frame or torch-level event
  (non-``aten::`` op, or an annotation that is not a step marker) on the same
  thread enclosing the ATen op — not the outermost Python frame. The lookup
  starts from the op's outermost ``aten::`` ancestor (its *root*: where the
  Python layer hands over to ATen).
* T_py origin: the later of the torch op start and the end of the previous
  root ATen op on the thread, so that consecutive ops under one long Python
  frame do not each count the frame's whole history (docs/method.md).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..trace.diagnostics import Diagnostics
from ..trace.nesting import nesting, sorted_unique
from .capture import Capture, find_capture
from .intervals import innermost_enclosing, take_or
from .views import LAUNCH_API_KINDS, LINKABLE_API_KINDS, Views

NONE = -1


@dataclass
class Links:
    """Index links (``-1`` = none) per device activity and per API call."""

    dev_api: np.ndarray  # device -> api index
    api_op: np.ndarray  # api -> host index of its ATen op
    op_torch: np.ndarray  # host index -> host index of its torch op (only for linked ATen ops)
    op_root: np.ndarray  # host index -> host index of its outermost aten:: ancestor (itself if outermost)
    py_origin_ns: np.ndarray  # host index of a root -> where its T_py starts (-1 without torch op)
    api_library: np.ndarray  # api -> api index of the enclosing library range
    api_has_device: np.ndarray  # api -> bool, launched any device activity
    has_torch_level: bool  # the trace has python frames or torch-level ops at all
    has_library_ranges: bool
    roots: np.ndarray  # host indices of the outermost aten:: ops, by (lane, start) (``root_atens``)
    capture: Capture | None = None  # CUDA-graph capture windows and captured launch calls (capture.py)


def link(views: Views, is_marker: np.ndarray, diags: Diagnostics) -> Links:
    """Build every link of the chain (see module docstring)."""
    api, host = views.api, views.host
    dev_api = _device_to_api(views)
    api_has_device = np.zeros(len(api.start_ns), dtype=bool)
    api_has_device[dev_api[dev_api >= 0]] = True
    capture = find_capture(views, api_has_device)
    api_op = _api_to_aten(views)
    torch_level = (host.kind_is("python") | (host.kind_is("op") & ~host.is_aten)
                   | (host.kind_is("annotation") & ~is_marker))
    roots = root_atens(views)
    op_root = _aten_roots(views, api_op, roots)
    op_torch, py_origin = _aten_to_torch(views, api_op, op_root, torch_level, roots)
    is_lib = api.kind_is("library")
    api_library = _enclosing(views, is_lib, np.flatnonzero(~is_lib))
    _count(views, dev_api, api_op, op_torch, api_has_device, bool(torch_level.any()), diags, capture.captured)
    return Links(dev_api, api_op, op_torch, op_root, py_origin, api_library, api_has_device,
                 bool(torch_level.any()), bool(is_lib.any()), roots, capture)


def _device_to_api(views: Views) -> np.ndarray:
    """Join device activities to linkable API calls on (process, correlation)."""
    api, dev = views.api, views.device
    linkable = np.flatnonzero(api.kind_is(*LINKABLE_API_KINDS) & (api.correlation != NONE))
    left = pd.DataFrame({"process": dev.process, "correlation": dev.correlation})
    right = pd.DataFrame({"process": api.process[linkable], "correlation": api.correlation[linkable],
                          "api": linkable}).drop_duplicates(["process", "correlation"], keep="first")
    merged = left.merge(right, on=["process", "correlation"], how="left")
    out = merged["api"].to_numpy(dtype="float64", na_value=np.nan)
    out = np.where(np.isnan(out) | (dev.correlation == NONE), NONE, out).astype(np.int64)
    return out


def _api_to_aten(views: Views) -> np.ndarray:
    """ATen op of each API call: external id first, then time containment."""
    api, host = views.api, views.host
    aten = np.flatnonzero(host.is_aten)
    found = _by_external_id(views, aten)
    todo = np.flatnonzero(found == NONE)
    hit = innermost_enclosing(host.lane[aten], host.start_ns[aten], host.end_ns[aten],
                              api.lane[todo], api.start_ns[todo])
    found[todo[hit >= 0]] = aten[hit[hit >= 0]]
    return found


def _by_external_id(views: Views, aten: np.ndarray) -> np.ndarray:
    api, host = views.api, views.host
    found = np.full(len(api.start_ns), NONE, dtype=np.int64)
    ext = host.external_id[aten]
    keep = ext != NONE
    ids, first = np.unique(ext[keep], return_index=True)
    if len(ids) == 0:
        return found
    cand_host = aten[keep][first]
    pos = np.clip(np.searchsorted(ids, api.external_id), 0, len(ids) - 1)
    cand = cand_host[pos]
    ok = ((ids[pos] == api.external_id) & (api.external_id != NONE) & (host.lane[cand] == api.lane)
          & (host.start_ns[cand] <= api.start_ns) & (api.start_ns <= host.end_ns[cand]))
    found[ok] = cand[ok]
    return found


def root_atens(views: Views) -> np.ndarray:
    """Host indices of the outermost aten:: ops (no aten:: op encloses them), sorted by (lane, start)."""
    host = views.host
    aten = np.flatnonzero(host.is_aten)
    depth, _ = nesting(host.lane[aten], host.start_ns[aten], host.end_ns[aten] - host.start_ns[aten])
    roots = aten[depth == 0]
    return roots[np.lexsort((host.start_ns[roots], host.lane[roots]))]


def _aten_roots(views: Views, api_op: np.ndarray, roots: np.ndarray) -> np.ndarray:
    """Outermost aten:: ancestor of every linked ATen op (itself when it is outermost)."""
    host = views.host
    root = np.full(len(host.start_ns), NONE, dtype=np.int64)
    ops = sorted_unique(api_op[api_op >= 0])
    hit = innermost_enclosing(host.lane[roots], host.start_ns[roots], host.end_ns[roots],
                              host.lane[ops], host.start_ns[ops])
    root[ops] = np.where(hit >= 0, take_or(roots, hit), ops)
    return root


def _aten_to_torch(views: Views, api_op: np.ndarray, op_root: np.ndarray, torch_level: np.ndarray,
                   all_roots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Torch op of each linked ATen op, and the T_py origin of each root."""
    host = views.host
    op_torch = np.full(len(host.start_ns), NONE, dtype=np.int64)
    py_origin = np.full(len(host.start_ns), NONE, dtype=np.int64)
    ops = sorted_unique(api_op[api_op >= 0])
    roots = sorted_unique(op_root[ops])
    cands = np.flatnonzero(torch_level)
    hit = innermost_enclosing(host.lane[cands], host.start_ns[cands], host.end_ns[cands],
                              host.lane[roots], host.start_ns[roots])
    root_torch = take_or(cands, hit)
    prev_end = _previous_root_end(views, roots, all_roots)
    torch_start = take_or(host.start_ns, root_torch)
    origin = np.minimum(np.maximum(torch_start, prev_end), host.start_ns[roots])
    py_origin[roots] = np.where(root_torch >= 0, origin, NONE)
    torch_of_root = np.full(len(host.start_ns), NONE, dtype=np.int64)
    torch_of_root[roots] = root_torch
    op_torch[ops] = torch_of_root[op_root[ops]]
    return op_torch, py_origin


def _previous_root_end(views: Views, roots: np.ndarray, ordered: np.ndarray) -> np.ndarray:
    """End of the previous outermost aten:: op on the same thread (-1 for the first)."""
    host = views.host
    prev_end = np.full(len(host.start_ns), NONE, dtype=np.int64)
    same_lane = host.lane[ordered[1:]] == host.lane[ordered[:-1]]
    prev_end[ordered[1:]] = np.where(same_lane, host.end_ns[ordered[:-1]], NONE)
    return prev_end[roots]


def _enclosing(views: Views, is_range: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Per API call: index of the innermost enclosing range among ``is_range`` API rows."""
    api = views.api
    out = np.full(len(api.start_ns), NONE, dtype=np.int64)
    ranges = np.flatnonzero(is_range)
    hit = innermost_enclosing(api.lane[ranges], api.start_ns[ranges], api.end_ns[ranges],
                              api.lane[queries], api.start_ns[queries])
    out[queries[hit >= 0]] = ranges[hit[hit >= 0]]
    return out


def _count(views: Views, dev_api, api_op, op_torch, api_has_device, has_torch, diags: Diagnostics,
           captured: np.ndarray) -> None:
    """Orphans and unlinked steps become counted diagnostics, never silent drops."""
    api = views.api
    diags.add("link.captured_launch", int(captured.sum()),
              "launch call recorded into a CUDA graph during stream capture (no device activity: not run)")
    unmatched = (api.correlation != NONE) & ~api_has_device & ~captured
    is_kernel = views.device.kind == "kernel"
    diags.add("link.orphan_kernel", int(((dev_api == NONE) & is_kernel).sum()),
              "kernel without a launch call in the trace")
    diags.add("link.orphan_copy", int(((dev_api == NONE) & ~is_kernel).sum()),
              "memcpy/memset device activity without an API call in the trace")
    diags.add("link.orphan_launch", int((api.kind_is(*LAUNCH_API_KINDS) & unmatched).sum()),
              "kernel launch call without device activity in the trace")
    diags.add("link.orphan_copy_call", int((api.kind_is("memcpy", "memset") & unmatched).sum()),
              "memcpy/memset call without a device record (not a kernel launch)")
    used = dev_api[dev_api >= 0]
    diags.add("link.no_op", int((api_op[sorted_unique(used)] == NONE).sum()), "launch call outside any aten:: op")
    counts = np.bincount(used, minlength=len(api.start_ns)) if len(used) else np.zeros(0, np.int64)
    diags.add("decompose.graph_launch", int(np.maximum(counts - 1, 0).sum()),
              "device activities beyond the first of one launch call")
    ops = sorted_unique(api_op[api_op >= 0])
    if has_torch:
        diags.add("link.no_torch_op", int((op_torch[ops] == NONE).sum()), "ATen op without an enclosing torch op")
    elif len(ops):
        diags.add("decompose.t_py_unmeasured", 1, "no python frames or torch-level ops in the trace")
