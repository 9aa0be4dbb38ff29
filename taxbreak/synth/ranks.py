"""Multi-rank traces with planted skew and planted causes of lateness (docs/serving.md §1).

Every rank runs the same segments: a compute op, then a collective op, then a
``cudaStreamSynchronize`` until the collective has ended. A segment plants per rank the
Python time and the dispatch gap of the compute op and the compute kernel's duration;
the collective kernel starts on each rank when it arrives and ends on all ranks
``transfer_ns`` after the last arrival (so the early ranks' kernels are longer). Layout
of one rank's segment (host on top, device below)::

    sync | gap | torch op [ py | aten [ dispatch | launch | tail ] ] | torch op [ py | aten [ d | launch | t ] ] | sync…
                                      └ compute kernel ──────────────┘                  └ collective … end = E

Each rank's times are shifted by its own clock offset: the ranks share no clock.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..trace.tables import TraceTables
from .planted import PlantedSpec, _api_row, _host, _Rows, _tables

COLLECTIVE_KERNEL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
COMPUTE_KERNEL = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublasLt"


@dataclass
class RankWork:
    """What one rank does before one collective."""

    python_ns: int = 2_000
    dispatch_ns: int = 1_000
    compute_ns: int = 50_000  # ≥ ~10 µs, so the collective always queues behind it


@dataclass
class PlantedRanksSpec:
    segments: list[list[RankWork]]  # per collective, one RankWork per rank
    steps: list[int]  # collectives per step (they sum to len(segments))
    transfer_ns: int = 30_000
    clock_offsets_ns: tuple[int, ...] = ()  # per rank; default: every rank on its own clock
    floor_ns: int = 4_710
    latency_ns: int = 2_000
    launch_ns: int = 5_000
    gap_ns: int = 1_000
    sync_tail_ns: int = 1_000
    t0_ns: int = 1_000_000
    one_trace: bool = False  # all ranks in one trace (a several-process export): one clock, one table set


@dataclass
class PlantedRanks:
    tables: list[TraceTables]  # one per rank, or one holding every rank (``one_trace``)
    collectives: pd.DataFrame  # truth per collective: late rank, lateness, transfer, planted deltas
    arrivals: pd.DataFrame  # truth per (collective, rank): dur_ns, skew_ns
    steps: pd.DataFrame  # truth per (step, rank): wall_ns, skew_ns, transfer_ns


@dataclass
class _Rank:
    spec: PlantedSpec
    rows: _Rows
    offset: int
    host: int = 0
    arrival: int = 0
    step_start: int = 0
    ext: int = -1  # the current op's external id, its launch's correlation and start
    corr: int = -1
    last_call: int = 0


def build_ranks(spec: PlantedRanksSpec) -> PlantedRanks:
    """Lay out every rank and return the tables plus the truth."""
    n = len(spec.segments[0])
    shared = _Rows() if spec.one_trace else None
    offsets = spec.clock_offsets_ns or tuple(0 if spec.one_trace else 7_777_777 * r for r in range(n))
    ranks = [_Rank(PlantedSpec([], pid=1000 + r, tid=2000 + r, device=r, stream=7, floor_ns=spec.floor_ns),
                   shared or _Rows(), offsets[r], host=spec.t0_ns) for r in range(n)]
    coll_truth, arrivals, step_truth, dev_free = [], [], [], 0
    seg = 0
    for step, count in enumerate(spec.steps):
        for rank in ranks:
            rank.step_start = rank.host
        for _ in range(count):
            end = _segment(spec, ranks, spec.segments[seg], dev_free)
            coll_truth.append(_collective_truth(spec, ranks, spec.segments[seg], seg, step, end))
            arrivals.extend({"collective": seg, "rank": r, "dur_ns": end - k.arrival,
                             "skew_ns": end - spec.transfer_ns - k.arrival} for r, k in enumerate(ranks))
            dev_free, seg = end, seg + 1
        for r, rank in enumerate(ranks):
            _annotate(rank, f"taxbreak/decode/{step}", rank.step_start, rank.host)
            step_truth.append({"step": step, "rank": r, "wall_ns": rank.host - rank.step_start})
    for rank in ranks:
        _annotate(rank, "taxbreak/run/0", spec.t0_ns, rank.host)
    tables = [_tables(shared, ranks[0].spec)] if shared else [_tables(k.rows, k.spec) for k in ranks]
    return PlantedRanks(tables, pd.DataFrame(coll_truth), pd.DataFrame(arrivals),
                        _step_totals(pd.DataFrame(step_truth), pd.DataFrame(arrivals), pd.DataFrame(coll_truth)))


def _segment(spec: PlantedRanksSpec, ranks: list[_Rank], work: list[RankWork], dev_free: int) -> int:
    """Compute op and collective op on every rank; the collective's common end."""
    for rank, w in zip(ranks, work):
        call = _op(spec, rank, "aten::addmm", w.python_ns, w.dispatch_ns)
        start = max(call + spec.floor_ns, dev_free) + spec.latency_ns
        _kernel(spec, rank, COMPUTE_KERNEL, call, start, w.compute_ns)
        call2 = _op(spec, rank, "vllm::all_reduce", 1_000, 500, gap=0)
        rank.arrival = max(call2 + spec.floor_ns, start + w.compute_ns) + spec.latency_ns
    end = max(k.arrival for k in ranks) + spec.transfer_ns
    for rank in ranks:
        _kernel(spec, rank, COLLECTIVE_KERNEL, rank.last_call, rank.arrival, end - rank.arrival)
        sync_end = end + spec.sync_tail_ns
        _api(rank, "sync", "cudaStreamSynchronize", rank.host, sync_end - rank.host)
        rank.host = sync_end
    return end


def _op(spec: PlantedRanksSpec, rank: _Rank, aten: str, python_ns: int, dispatch_ns: int, gap: int | None = None) -> int:
    """A torch op at the rank's host cursor launching one kernel; returns the launch call's start."""
    torch_start = rank.host + (spec.gap_ns if gap is None else gap)
    aten_start = torch_start + python_ns
    call = aten_start + dispatch_ns
    ext = rank.rows.nid()
    rank.ext, rank.corr, rank.last_call = ext, rank.rows.nid(), call
    _api(rank, "launch", "cudaLaunchKernel", call, spec.launch_ns, rank.corr, ext)
    aten_end = call + spec.launch_ns + 300
    _host(rank.rows, rank.spec, "op", aten, aten_start + rank.offset, aten_end - aten_start, ext)
    _host(rank.rows, rank.spec, "python", "model.py(10): forward", torch_start + rank.offset,
          aten_end + 200 - torch_start)
    rank.host = aten_end + 200
    return call


def _api(rank: _Rank, kind: str, name: str, start: int, dur: int, corr: int | None = None, ext: int = -1) -> None:
    corr = rank.rows.nid() if corr is None else corr
    rank.rows.api.append(_api_row(rank.rows, rank.spec, "cuda_runtime", kind, name, start + rank.offset, dur, corr,
                                  ext))


def _kernel(spec: PlantedRanksSpec, rank: _Rank, name: str, call: int, start: int, dur: int) -> None:
    s = rank.spec
    rank.rows.device.append((rank.rows.nid(), s.pid, "kernel", name, s.device, s.stream, 1, start + rank.offset,
                             dur, rank.corr, rank.ext, 1, 1, 1, 128, 1, 1, 32, 0, -1, -1, -1))


def _annotate(rank: _Rank, name: str, start: int, end: int) -> None:
    _host(rank.rows, rank.spec, "annotation", name, start + rank.offset, end - start)


def _collective_truth(spec, ranks, work, seg, step, end) -> dict:
    arrival = [k.arrival for k in ranks]
    late, early = arrival.index(max(arrival)), arrival.index(min(arrival))
    lateness = max(arrival) - min(arrival)
    deltas = {f"{layer}_ns": getattr(work[late], f"{layer}_ns") - getattr(work[early], f"{layer}_ns")
              for layer in ("python", "dispatch", "compute")}
    return {"collective": seg, "step": step, "late_rank": late if lateness else None,
            "waiting_rank": early if lateness else None, "lateness_ns": lateness, "transfer_ns": spec.transfer_ns,
            **deltas}


def _step_totals(steps: pd.DataFrame, arrivals: pd.DataFrame, collectives: pd.DataFrame) -> pd.DataFrame:
    per = arrivals.merge(collectives[["collective", "step", "transfer_ns"]], on="collective")
    sums = per.groupby(["step", "rank"])[["skew_ns", "transfer_ns"]].sum().reset_index()
    return steps.merge(sums, on=["step", "rank"])
