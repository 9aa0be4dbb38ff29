"""Lanes, thread ids and flow arrows for the tracks ``taxbreak annotate`` adds.

Slices arrive as one frame (``pid``, ``track``, ``name``, ``start_ns``,
``dur_ns``, ``args``, ``link``; ns in the trace-table clock). Each track of a
process gets lanes so that its slices nest properly, and each lane its own
thread id from ``TID_BASE`` up; the events are written in the trace's own
clock (``shift_ns`` added) as exact µs text.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..trace.nesting import nesting
from .annotate_io import us_text, us_texts

CATEGORY = "taxbreak"
TID_BASE = 2_000_000_000  # above any OS thread id (Linux pid_max <= 2^22) and below 2^32
FLOW_ID_BASE = 7_000_000_000_000  # far above CUPTI correlation ids, which Kineto's own flows use
ASYNC_ID_BASE = 8_000_000_000_000
MAX_LANES = 16
IDLE_TRACK = "taxbreak GPU idle by cause"  # the device track of Analysis.idle; flows start there


def assign_lanes(group: np.ndarray, start: np.ndarray, end: np.ndarray, max_lanes: int = MAX_LANES) -> np.ndarray:
    """A lane per interval so that the intervals of one group on one lane nest properly.

    Each pass keeps a properly nested subset of the remaining intervals (see
    :func:`nested_subset`) on the current lane and moves the rest to the next.
    Intervals still left after ``max_lanes`` passes get lane -1.
    """
    lane = np.full(len(start), -1, dtype=np.int64)
    todo = np.arange(len(start))
    for current in range(max_lanes):
        if len(todo) == 0:
            break
        ok = nested_subset(group[todo], start[todo], end[todo])
        lane[todo[ok]] = current
        todo = todo[~ok]
    return lane


def nested_subset(group: np.ndarray, start: np.ndarray, end: np.ndarray, max_rounds: int = 32) -> np.ndarray:
    """A mask of intervals that nest properly per group (disjoint or contained).

    Rounds of :func:`taxbreak.trace.nesting.nesting` drop every interval that
    ends after its computed parent until none does; a set where every interval
    lies inside its innermost open predecessor is a proper stack. If that has
    not settled after ``max_rounds`` rounds, the strict rule (each interval
    starts after all earlier ones ended) gives a valid subset instead.
    """
    keep = np.ones(len(start), dtype=bool)
    for _ in range(max_rounds):
        idx = np.flatnonzero(keep)
        depth, parent = nesting(group[idx], start[idx], end[idx] - start[idx])
        bad = (depth > 0) & (parent < 0)
        has = parent >= 0
        bad[has] = end[idx][has] > end[idx][parent[has]]
        if not bad.any():
            return keep
        keep[idx[bad]] = False
    return keep & _disjoint_subset(group, start, end)


def _disjoint_subset(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per group in start order, the intervals that start after every earlier one ended."""
    order = np.lexsort((start, group))
    g, s, e = group[order], start[order], end[order]
    reach = pd.Series(e).groupby(g).cummax().groupby(g).shift(1).to_numpy(dtype=float, na_value=-np.inf)
    ok = np.zeros(len(start), dtype=bool)
    ok[order] = s >= reach
    return ok


def lay_out(slices: pd.DataFrame, max_lanes: int = MAX_LANES) -> tuple[np.ndarray, np.ndarray]:
    """``(tid, lane)`` per slice: lanes per (pid, track), a thread id per (pid, track, lane).

    Overflow slices (lane -1, written as async events) keep their track's first thread id.
    """
    pid, track = slices["pid"].to_numpy(), slices["track"].to_numpy()
    group = pd.factorize(pd.MultiIndex.from_arrays([pid, track]))[0]
    start = slices["start_ns"].to_numpy()
    lane = assign_lanes(group, start, start + slices["dur_ns"].to_numpy(), max_lanes)
    codes = pd.factorize(pd.MultiIndex.from_arrays([pid, track, np.maximum(lane, 0)]), sort=True)[0]
    return TID_BASE + codes.astype(np.int64), lane


def slice_events(slices: pd.DataFrame, tid: np.ndarray, lane: np.ndarray, shift_ns: int) -> list[dict]:
    """X events for slices on a lane, async b/e pairs (their own rows in a viewer) for the rest."""
    start = slices["start_ns"].to_numpy() + np.int64(shift_ns)
    dur = slices["dur_ns"].to_numpy()
    pid, names, args = slices["pid"].to_numpy(), slices["name"].to_numpy(), slices["args"].to_numpy()
    on = np.flatnonzero(lane >= 0)
    ts_text, dur_text = us_texts(start[on]), us_texts(dur[on])
    events = [{"ph": "X", "cat": CATEGORY, "name": n, "pid": p, "tid": t, "ts": ts, "dur": d, "args": a}
              for n, p, t, ts, d, a in zip(names[on].tolist(), pid[on].tolist(), tid[on].tolist(), ts_text,
                                           dur_text, args[on].tolist())]
    for n, i in enumerate(np.flatnonzero(lane < 0)):
        ident = f"0x{ASYNC_ID_BASE + n:x}"
        common = {"cat": CATEGORY, "name": names[i], "id": ident, "pid": int(pid[i]), "tid": int(tid[i])}
        events.append({"ph": "b", **common, "ts": us_text(start[i]), "args": args[i]})
        events.append({"ph": "e", **common, "ts": us_text(start[i] + dur[i])})
    return events


def thread_names(slices: pd.DataFrame, tid: np.ndarray, lane: np.ndarray, ts_ns: int) -> list[dict]:
    """One ``thread_name`` metadata event per new thread: its track, plus the lane after the first."""
    frame = pd.DataFrame({"pid": slices["pid"].to_numpy(), "tid": tid, "track": slices["track"].to_numpy(),
                          "lane": np.maximum(lane, 0)}).drop_duplicates(["pid", "tid"])
    return [{"ph": "M", "cat": CATEGORY, "name": "thread_name", "pid": int(p), "tid": int(t), "ts": us_text(ts_ns),
             "args": {"name": label if ln == 0 else f"{label} · lane {ln}"}}
            for p, t, label, ln in zip(frame["pid"], frame["tid"], frame["track"], frame["lane"])]


def flow_pair(ident: int, name: str, out: tuple[int, int, int], into: tuple[int, int, int]) -> list[dict]:
    """A flow arrow from the slice enclosing ``out`` (pid, tid, ts ns) to the one enclosing ``into``."""
    return [{"ph": "s", "cat": CATEGORY, "name": name, "id": ident, "pid": int(out[0]), "tid": int(out[1]),
             "ts": us_text(out[2])},
            {"ph": "f", "bp": "e", "cat": CATEGORY, "name": name, "id": ident, "pid": int(into[0]),
             "tid": int(into[1]), "ts": us_text(into[2])}]


def _mid(start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    # flows bind to the slice enclosing their time: the middle is inside it whatever the tie order
    return start + dur // 2


def launch_flows(k: pd.DataFrame, shift_ns: int, max_flows: int, first_id: int) -> list[dict]:
    """Launch call -> kernel arrows for the ``max_flows`` kernels with the longest T_launch
    (the kernel's thread in the trace: pid = device, tid = stream)."""
    if max_flows <= 0 or len(k) == 0:
        return []
    t_launch = pd.to_numeric(k.get("t_launch_ns"), errors="coerce").fillna(-1).to_numpy()
    pick = np.argsort(-t_launch, kind="stable")[:max_flows]
    col = {c: pd.to_numeric(k[c], errors="coerce").fillna(0).to_numpy(np.int64)[pick]
           for c in ("launch_pid", "launch_tid", "launch_start_ns", "launch_dur_ns", "device", "stream",
                     "start_ns", "dur_ns") if c in k.columns}
    out_ts = _mid(col["launch_start_ns"], col.get("launch_dur_ns", np.zeros(len(pick), np.int64))) + shift_ns
    into_ts = _mid(col["start_ns"], col["dur_ns"]) + shift_ns
    events = []
    for n in range(len(pick)):
        events += flow_pair(first_id + n, "launch → kernel", (col["launch_pid"][n], col["launch_tid"][n], out_ts[n]),
                            (col["device"][n], col["stream"][n], into_ts[n]))
    return events


def idle_flows(slices: pd.DataFrame, tid: np.ndarray, lane: np.ndarray, shift_ns: int, max_flows: int,
               first_id: int) -> list[dict]:
    """Device idle slice -> host slice of its cause, for the ``max_flows`` longest idle pieces."""
    frame = slices.assign(tid=tid, mid=_mid(slices["start_ns"].to_numpy(), slices["dur_ns"].to_numpy()) + shift_ns)
    frame = frame[(frame["link"].to_numpy() >= 0) & (lane >= 0)]
    if max_flows <= 0 or len(frame) == 0:
        return []
    device = frame[frame["track"] == IDLE_TRACK]
    pairs = device.merge(frame[frame["track"] != IDLE_TRACK], on="link", suffixes=("", "_host"))
    pairs = pairs.sort_values(["dur_ns", "link"], ascending=[False, True], kind="stable").head(max_flows)
    events = []
    for n, row in enumerate(pairs.itertuples(index=False)):
        events += flow_pair(first_id + n, "GPU idle → cause", (row.pid, row.tid, row.mid),
                            (row.pid_host, row.tid_host, row.mid_host))
    return events
