"""Isolation replay of a run's unique kernels (TaxBreak stage 2).

For every unique kernel of a full-model trace, its launching ATen op is
rebuilt from the recorded shapes (:mod:`.replay_call`) and called alone,
``runs`` times after ``warmup`` calls, each call inside an NVTX range and a
``record_function`` range named ``taxbreak/replay/<op>/<i>`` and followed by
``torch.cuda.synchronize()`` — so every launch meets an idle GPU and a quiet
host, which is the point of isolation. The replay trace (PyTorch profiler,
CUPTI) is read back, the target kernel of each range is matched
(:func:`.replay_match.match_replay`), and per unique kernel:

    T_dispatch (replay) = launch-call start − range start
    T_launch   (replay) = kernel start − launch-call start

Ops that synchronize or whose output size depends on data are not replayed
(:data:`.replay_inputs.SKIPPED_OPS`); they and every op that cannot be rebuilt
are listed with the reason. :func:`.replay_compare.compare` puts the replayed
values next to the in-trace ones.
"""
from __future__ import annotations

import json
import logging
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..trace.errors import CaptureError, TaxbreakError, TraceNotFoundError
from ..trace.paths import read_run_manifest, run_trace_file
from ..trace.tables import TraceTables
from .kineto_log import profiler_session
from .replay_call import rebuild, resolve_overloads
from .replay_inputs import OpRecord, dtype_of, parse_record
from .replay_match import REPLAY_PREFIX, RECORD_COLUMNS, kernel_chains, unique_kernels

log = logging.getLogger(__name__)

TRACE_NAMES = ("trace.json.gz", "trace.json")


@dataclass
class ReplayPlan:
    """What to replay: unique kernels (with ``op_index``), op records, skipped ops."""

    kernels: pd.DataFrame  # unique_kernels() + op_index (-1: not replayed) + skip_reason
    records: list[OpRecord] = field(default_factory=list)  # indexed by op_index
    default_dtype: object = None

    @property
    def targets(self) -> pd.DataFrame:
        return self.kernels[self.kernels["op_index"] >= 0]

    def skipped(self) -> pd.DataFrame:
        """One row per skipped op: ``op_name``, ``reason``, ``kernels``, ``frequency``."""
        skipped = self.kernels[self.kernels["op_index"] < 0]
        return (skipped.assign(op_name=skipped["op_name"].replace("", "(no ATen op)"))
                .groupby(["op_name", "skip_reason"], sort=False)
                .agg(kernels=("kernel_id", "size"), frequency=("frequency", "sum"))
                .reset_index().rename(columns={"skip_reason": "reason"}))


def find_trace(run_dir: str | Path) -> Path:
    """The trace of a run directory (or the path itself when it is a trace file)."""
    path = Path(run_dir)
    if path.is_file():
        return path
    if not path.exists():
        raise TraceNotFoundError(code="input.not_found", message="no such run directory", path=str(path))
    found = run_trace_file(path, TRACE_NAMES, read_run_manifest(path))
    if found is not None:
        return found
    raise TaxbreakError(code="run.not_a_run", message="no trace.json.gz in the directory", path=str(path),
                        hint="pass a directory written by `taxbreak profile` (Kineto backend)")


def _op_key(frame: pd.DataFrame) -> pd.Series:
    cols = ["op_name", *RECORD_COLUMNS]
    return pd.Series([json.dumps(list(row)) for row in frame[cols].itertuples(index=False)], index=frame.index)


def most_common_dtype(records: list[OpRecord]):
    """The most frequent floating dtype among recorded tensor inputs (tensor lists use it)."""
    counts = Counter(t for rec in records for t in rec.types if (dtype_of(t) is not None and dtype_of(t).is_floating_point))
    return dtype_of(counts.most_common(1)[0][0]) if counts else None


def _record_or_reason(row) -> tuple[OpRecord | None, str | None]:
    """The op record of a unique kernel row, or why it cannot be replayed."""
    if not row.op_name:
        return None, "launch outside any ATen op"
    try:
        record = parse_record(row.op_name, row.input_dims or None, row.input_types or None,
                              row.input_strides or None, row.concrete_inputs or None)
        resolve_overloads(record)
    except CaptureError as err:
        return None, err.message.split(": ", 1)[-1].removeprefix("skipped: ")
    return record, None


def plan_replay(tables: TraceTables) -> ReplayPlan:
    """Unique kernels of ``tables`` and the distinct op calls that launch them.

    Loops only over distinct op calls (hundreds), never over events.
    """
    kernels = unique_kernels(kernel_chains(tables))
    kernels["op_key"] = _op_key(kernels) if len(kernels) else pd.Series(dtype=object)
    distinct = kernels.drop_duplicates("op_key")
    records, reasons, index_of = [], {}, {}
    for row in distinct.itertuples(index=False):
        record, reason = _record_or_reason(row)
        if reason is None:
            index_of[row.op_key] = len(records)
            records.append(record)
        else:
            reasons[row.op_key] = reason
    kernels["op_index"] = kernels["op_key"].map(index_of).fillna(-1).astype("int64")
    kernels["skip_reason"] = kernels["op_key"].map(reasons)
    return ReplayPlan(kernels.drop(columns="op_key"), records, most_common_dtype(records))


def run_replay(plan: ReplayPlan, trace_path: Path, device: str = "cuda", warmup: int = 20,
               runs: int = 50) -> dict[int, str]:
    """Replay every planned op under the PyTorch profiler; writes ``trace_path``.

    Works on any device (the tests run it on CPU); on CUDA it records the
    launches and kernels. Returns ``{op_index: reason}`` for ops that failed to
    rebuild on ``device``.
    """
    import torch
    from torch.profiler import record_function

    is_cuda = str(device).startswith("cuda")
    sync = torch.cuda.synchronize if is_cuda else (lambda: None)
    nvtx = torch.cuda.nvtx if is_cuda else None
    failed: dict[int, str] = {}
    with profiler_session(device).profile as prof:
        for op_index, record in enumerate(plan.records):
            try:
                call = rebuild(record, device, plan.default_dtype)[0]  # its output is dropped at once
            except CaptureError as err:
                failed[op_index] = err.message.split(": ", 1)[-1]
                continue
            _replay_one(call, op_index, warmup, runs, sync, nvtx, record_function)
            del call
    trace_path.parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(trace_path))
    return failed


def _replay_one(call, op_index: int, warmup: int, runs: int, sync, nvtx, record_function) -> None:
    for _ in range(warmup):
        call.run()
        sync()
    for i in range(runs):
        name = f"{REPLAY_PREFIX}{op_index}/{i}"
        if nvtx is not None:
            nvtx.range_push(name)
        with record_function(name):
            call.run()
        if nvtx is not None:
            nvtx.range_pop()
        sync()  # the next launch meets an idle GPU


@dataclass
class ReplayResult:
    """Per-kernel comparison, its summary, and the ops that were not replayed."""

    kernels: pd.DataFrame
    summary: dict
    skipped: pd.DataFrame
    trace_path: str | None = None


def replay(run_dir: str | Path, warmup: int = 20, runs: int = 50, floor_us: float | None = None,
           keep_trace: Path | None = None) -> ReplayResult:
    """Replay the unique kernels of a run on the GPU and compare with the trace.

    Raises:
        TaxbreakError: ``device.unavailable`` (checked first) without a GPU;
            ``input.not_found`` / ``run.not_a_run`` for a bad run directory.
    """
    from ..decompose.floor import resolve_floor
    from ..readers import load_trace
    from .floor import require_cuda
    from .replay_compare import add_python_layer, compare
    from .replay_match import match_replay, replay_samples

    require_cuda()
    tables = load_trace(find_trace(run_dir))
    plan = plan_replay(tables)
    with tempfile.TemporaryDirectory(prefix="taxbreak-replay-") as tmp:
        trace_path = Path(keep_trace or tmp) / "replay_trace.json"
        failed = run_replay(plan, trace_path, "cuda", warmup, runs)
        matched = match_replay(plan.targets, replay_samples(load_trace(trace_path)))
    plan = mark_failed(plan, failed)
    floor = resolve_floor(tables, floor_us)
    kernels, summary = compare(plan.kernels, matched, floor.floor_us, floor.source)
    add_python_layer(summary, *_python_layer(tables, floor_us))
    summary["runs"], summary["warmup"] = runs, warmup
    return ReplayResult(kernels, summary, plan.skipped(), str(trace_path) if keep_trace else None)


def _python_layer(tables: TraceTables, floor_us: float | None) -> tuple[float | None, float | None]:
    """(T_Py total µs, HDBI) of the full decomposition; (None, None) when it cannot run.

    T_Py is the Python/torch layer above the ATen op, which replay does not
    re-measure; it is taken from ``taxbreak.decompose.analyze`` unchanged.
    """
    from ..decompose import analyze

    try:
        overall = analyze(tables, floor_us=floor_us).summary["all"]
    except TaxbreakError as err:
        log.debug("full analysis unavailable for the replay comparison: %s", err)
        return None, None
    return overall.get("framework_python_us"), overall.get("hdbi")


def mark_failed(plan: ReplayPlan, failed: dict[int, str]) -> ReplayPlan:
    """Move ops that failed to rebuild on the device into the skipped list."""
    if not failed:
        return plan
    kernels = plan.kernels.copy()
    hit = kernels["op_index"].isin(list(failed))
    kernels.loc[hit, "skip_reason"] = kernels.loc[hit, "op_index"].map(failed)
    kernels.loc[hit, "op_index"] = -1
    return ReplayPlan(kernels, plan.records, plan.default_dtype)


def distinct_records(tables: TraceTables) -> list[OpRecord]:
    """Every distinct recorded ``aten::`` call of a trace (name plus recorded inputs)."""
    host = tables.host_events.select(["kind", "name", *RECORD_COLUMNS]).to_pandas()
    host = host[(host["kind"].astype(object) == "op") & host["name"].str.startswith("aten::", na=False)]
    host = host.drop(columns="kind").drop_duplicates()
    return [parse_record(*row) for row in host.itertuples(index=False)]


def rebuild_coverage(records: list[OpRecord], device: str = "cpu", default_dtype=None) -> pd.DataFrame:
    """Rebuild and run every record once on ``device``: the harness check.

    Returns:
        One row per record: ``op_name``, ``status`` (``rebuilt`` | ``skipped``
        | ``unsupported``), ``overload``, ``reason``, ``output_shapes``.
    """
    from .replay_call import output_shapes
    from .replay_inputs import SKIPPED_OPS

    rows = []
    for record in records:
        try:
            call, out = rebuild(record, device, default_dtype)
            rows.append((record.name, "rebuilt", call.overload_name, "", output_shapes(out)))
        except CaptureError as err:
            status = "skipped" if record.name in SKIPPED_OPS else "unsupported"
            reason = err.message.split(": ", 1)[-1].removeprefix("skipped: ")
            rows.append((record.name, status, "", reason, []))
    return pd.DataFrame(rows, columns=["op_name", "status", "overload", "reason", "output_shapes"])
