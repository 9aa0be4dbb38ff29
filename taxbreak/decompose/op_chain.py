"""The host time of every outermost ATen op that launches kernels, conserved.

Inside one root invocation R (an outermost dispatcher op on one thread that
holds at least one kernel or graph launch call) the thread's time is cut by
the *chain calls* R makes — kernel/graph launches, memcpy/memset calls and
synchronize calls — into:

    dur(R) = Σ T_dispatch(launches) + Σ launch calls + Σ copy calls + Σ sync calls + after_last_launch

* T_dispatch of a launch = the host time since the previous launch of R ended
  (R's start for the first), *less* the copy and sync calls in between. The
  time before a workspace ``cudaMemsetAsync`` inside a GEMM (cuBLASLt
  heuristics, allocator) therefore stays with the GEMM's launch: it is the
  library's host work, and it reaches ΔCT (chaining from the memset's end, as
  the paper's per-launch T_dispatch does, lost it).
* copy and sync calls are named buckets (``copy_call_ns``, ``sync_call_ns``);
  the launch calls' own host time is ``launch_call_ns`` (ΔKT models it as T_sys).
* ``after_last_launch_ns``: R's time after its last launch (output wrapping,
  later copies' gaps).

Calls that overlap an earlier call of R (nested or broken records) count only
from where the earlier one ended; calls are clipped to R's interval, so the
account is exact for any input (``decompose.overlapping_calls`` counts them).
docs/method.md §2.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..trace.diagnostics import Diagnostics
from .intervals import running_end
from .link import NONE, Links
from .views import LAUNCH_API_KINDS, Views

COPY_KINDS = ("memcpy", "memset")
CHAIN_KINDS = (*LAUNCH_API_KINDS, *COPY_KINDS, "sync")
ACCOUNT_PARTS = ("dispatch_ns", "launch_call_ns", "copy_call_ns", "sync_call_ns", "after_last_launch_ns")


@dataclass
class Chain:
    """Per API call: T_dispatch (int64 ns, -1 unless a launch inside a root op) and
    whether it is its root's first launch; per root invocation: the account."""

    t_dispatch_ns: np.ndarray
    first_in_root: np.ndarray
    accounts: pd.DataFrame


def op_chain(views: Views, links: Links, diags: Diagnostics) -> Chain:
    """T_dispatch per launch call and the conserved account of every launching root op."""
    api, host = views.api, views.host
    n_api = len(api.start_ns)
    t_dispatch = np.full(n_api, NONE, np.int64)
    first = np.zeros(n_api, bool)
    calls = _chain_calls(views, links)
    if len(calls) == 0:
        return Chain(t_dispatch, first, _empty_accounts())
    root = links.op_root[links.api_op[calls]]
    calls, root = _launching_roots(api, calls, root)
    if len(calls) == 0:
        return Chain(t_dispatch, first, _empty_accounts())
    r_start, r_end = host.start_ns[root], host.end_ns[root]
    start = np.clip(api.start_ns[calls], r_start, r_end)
    end = np.clip(api.end_ns[calls], start, r_end)
    new_root = np.concatenate([[True], root[1:] != root[:-1]])
    prev_end = np.where(new_root, r_start, np.roll(running_end(root, start, end), 1))
    prev_end = np.maximum(prev_end, r_start)
    diags.add("decompose.overlapping_calls", int((start < prev_end).sum()),
              "API calls inside an op that start before an earlier call of the op ended")
    gap = np.maximum(start - prev_end, 0)
    own = np.maximum(end - np.maximum(start, prev_end), 0)  # the call's time not inside an earlier call
    is_launch = api.kind_is(*LAUNCH_API_KINDS)[calls]
    owner = _next_launch(root, is_launch)
    dispatch = np.bincount(np.maximum(owner, 0), weights=np.where(owner >= 0, gap, 0),
                           minlength=len(calls)).astype(np.int64)
    t_dispatch[calls[is_launch]] = dispatch[is_launch]
    first[calls[is_launch & _first_launch(root, is_launch)]] = True
    accounts = _accounts(views, api, calls, root, gap, own, owner, is_launch, new_root, end)
    return Chain(t_dispatch, first, accounts)


def _chain_calls(views: Views, links: Links) -> np.ndarray:
    """Chain calls inside a dispatcher op, in (root, start) order."""
    api = views.api
    idx = np.flatnonzero((links.api_op >= 0) & api.kind_is(*CHAIN_KINDS))
    root = links.op_root[links.api_op[idx]]
    keep = root >= 0
    idx, root = idx[keep], root[keep]
    return idx[np.lexsort((api.end_ns[idx] * -1, api.start_ns[idx], root))]


def _launching_roots(api, calls: np.ndarray, root: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Only the roots that hold a kernel or graph launch call (``calls`` are in root order: one
    reduction per root run, no set lookups)."""
    launches = api.kind_is(*LAUNCH_API_KINDS)[calls]
    heads = np.flatnonzero(np.concatenate([[True], root[1:] != root[:-1]]))
    launching = np.logical_or.reduceat(launches, heads)
    keep = np.repeat(launching, np.diff(np.append(heads, len(root))))
    return calls[keep], root[keep]


def _next_launch(root: np.ndarray, is_launch: np.ndarray) -> np.ndarray:
    """Per chain call: position of the first launch at or after it in its root (-1: none)."""
    n = len(root)
    pos = np.where(is_launch, np.arange(n), n)
    # reverse running minimum within each root
    nxt = np.minimum.accumulate(pos[::-1])[::-1]
    same_root = np.zeros(n, bool)
    ok = nxt < n
    same_root[ok] = root[np.minimum(nxt[ok], n - 1)] == root[ok]
    return np.where(ok & same_root, nxt, NONE)


def _first_launch(root: np.ndarray, is_launch: np.ndarray) -> np.ndarray:
    """True for the first launch call of each root (positions in chain order)."""
    idx = np.flatnonzero(is_launch)
    first = np.zeros(len(root), bool)
    head = np.concatenate([[True], root[idx][1:] != root[idx][:-1]]) if len(idx) else np.zeros(0, bool)
    first[idx[head]] = True
    return first


def _accounts(views: Views, api, calls, root, gap, own, owner, is_launch, new_root, end) -> pd.DataFrame:
    """One row per launching root op: its time split into the account's parts (module docstring)."""
    host = views.host
    heads = np.flatnonzero(new_root)

    def per_root(values: np.ndarray) -> np.ndarray:  # the calls of one root are one run: exact int sums
        return np.add.reduceat(np.asarray(values, np.int64), heads)

    is_copy = api.kind_is(*COPY_KINDS)[calls]
    is_sync = api.kind_is("sync")[calls]
    r = root[heads]
    last_end = np.maximum.reduceat(end, heads)
    tail = host.end_ns[r] - np.maximum(last_end, host.start_ns[r])
    return pd.DataFrame({
        "host_row": r, "pid": views.lane_pid[host.lane[r]], "tid": views.lane_tid[host.lane[r]],
        "op_name": host.names(r), "start_ns": host.start_ns[r], "dur_ns": host.end_ns[r] - host.start_ns[r],
        "launches": per_root(is_launch.astype(np.int64)),
        "dispatch_ns": per_root(np.where(owner >= 0, gap, 0)),
        "launch_call_ns": per_root(np.where(is_launch, own, 0)),
        "copy_call_ns": per_root(np.where(is_copy, own, 0)),
        "sync_call_ns": per_root(np.where(is_sync, own, 0)),
        "after_last_launch_ns": tail + per_root(np.where(owner < 0, gap, 0)),
    })


def _empty_accounts() -> pd.DataFrame:
    cols = ["host_row", "pid", "tid", "op_name", "start_ns", "dur_ns", "launches", *ACCOUNT_PARTS]
    return pd.DataFrame({c: pd.Series([], dtype=object if c == "op_name" else np.int64) for c in cols})
