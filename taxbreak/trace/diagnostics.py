"""Recoverable oddities, counted per code and shown once with a count.

A reader or analysis never drops data silently: every event it cannot place in
a table, every clamp and every unmatched link adds to a diagnostic here.
"""
from __future__ import annotations

from dataclasses import dataclass, field

INFO = "info"
DATA_LOSS = "data_loss"  # an input event did not reach any table
WARNING = "warning"  # data kept but altered or unlinked

DIAGNOSTIC_CODES: dict[str, tuple[str, str]] = {
    # code: (severity, meaning)
    "event.missing_dur": (WARNING, "complete event without dur; duration taken as 0"),
    "event.negative_dur": (WARNING, "negative duration clamped to 0"),
    "event.missing_field": (DATA_LOSS, "event without ts/ph/name; skipped"),
    "event.wrong_type": (DATA_LOSS, "event field with the wrong JSON type; skipped"),
    "event.number_out_of_range": (DATA_LOSS, "ts/dur beyond int64 ns, the span bound or the number "
                                  "length/exponent bounds; skipped"),
    "event.id_out_of_range": (DATA_LOSS, "an id (pid, tid, correlation, stream, grid, flow id...) beyond "
                              "int64/uint64; skipped"),
    "event.id_not_integer": (WARNING, "a correlation or External id that is a fraction or a boolean; read as "
                             "absent (5.5 and true link nothing), never truncated to another event's id"),
    "kineto.header_too_deep": (WARNING, "a top-level header value (traceName, distributedInfo...) nested deeper "
                               "than 32 levels; dropped from the metadata"),
    "trace.lone_surrogate": (WARNING, "an escaped lone UTF-16 surrogate (\\ud800) replaced by U+FFFD"),
    "event.unknown_category": (DATA_LOSS, "event of a category taxbreak does not model; skipped"),
    "event.profiler_span": (INFO, "the profiler's own window span (cat 'Trace'); not a workload event"),
    "event.profiler_overhead": (INFO, "the profiler's own overhead (cat 'overhead': CUPTI buffer flushes, set-up); "
                                "ordinary profiling cost, not a workload event and no data lost"),
    "event.instant": (INFO, "instant event (memory, iteration marks); not modelled"),
    "event.unsupported_phase": (DATA_LOSS, "event with a ph value other than X/i/M/s/f/t/B/E; skipped"),
    "event.unbalanced": (DATA_LOSS, "B/E pair without its partner; skipped"),
    "event.metadata": (INFO, "M metadata event, folded into TraceMeta"),
    "event.begin_end": (DATA_LOSS, "B/E duration event; the Kineto reader models only X complete events"),
    "trace.invalid_utf8": (WARNING, "bytes that are not valid UTF-8 were replaced by U+FFFD"),
    "trace.truncated": (DATA_LOSS, "truncated tail dropped (--allow-truncated)"),
    "trace.no_device_info": (INFO, "no deviceProperties / TARGET_INFO_GPU; device names unknown"),
    "nsys.duplicate_launch": (INFO, "duplicate launch row of schema 2.x removed"),
    "nsys.missing_table": (INFO, "an optional Nsight table is absent"),
    "nsys.empty_range": (INFO, "NVTX mark or range without an end; skipped"),
    "nsys.duplicate_api": (INFO, "duplicate non-launch API row of schema 2.x (CUDA backtrace copy) removed"),
    "nsys.unresolved_string": (WARNING, "a name id not found in StringIds; name left null"),
    "nsys.invalid_utf8": (WARNING, "text that is not valid UTF-8; invalid bytes replaced by U+FFFD"),
    "nsys.untrusted_schema": (WARNING, "a view or generated column in the export; never read (stored tables only)"),
    "nsys.wrong_storage": (WARNING, "a StringIds value stored as a number or blob; read as text"),
    "link.orphan_kernel": (WARNING, "kernel whose launch call is not in the trace"),
    "link.orphan_copy": (WARNING, "memcpy/memset device activity whose API call is not in the trace"),
    "link.orphan_launch": (WARNING, "kernel launch call whose device activity is not in the trace"),
    "link.captured_launch": (INFO, "launch call recorded into a CUDA graph during stream capture; not run, "
                             "not an orphan"),
    "link.orphan_copy_call": (INFO, "memcpy/memset call without a device record (not a kernel launch)"),
    "link.no_op": (WARNING, "launch call outside any ATen op"),
    "link.no_torch_op": (INFO, "ATen op without an enclosing Python frame or torch-level op"),
    "device.duplicate_activity": (WARNING, "a device row that repeats another exactly (merged or double-flushed "
                                  "trace); counted once"),
    "device.stream_overlap": (WARNING, "a device row that starts before the work ahead of it on its stream ended "
                              "(another launch); moved to that end, the overlap counted once"),
    "decompose.outlier_timestamp": (WARNING, "an event far outside the rest of the trace (ts 0, a wrapped clock); "
                                    "left out of the analysis"),
    "decompose.idle_summarised": (INFO, "idle gaps whose host part crosses more segments than the linear budget "
                                  "(many devices fed by one thread): one piece per cause, sums exact"),
    "decompose.t_py_unmeasured": (INFO, "trace has no Python frames or torch-level ops; T_py not measured"),
    "decompose.negative_interval": (WARNING, "a component interval was negative and clamped to 0"),
    "decompose.no_steps": (INFO, "no step markers; the whole trace is one step"),
    "decompose.graph_launch": (INFO, "kernels replayed from a CUDA graph share one launch"),
    "decompose.below_floor": (INFO, "T_launch shorter than T_sys: the split's floor part is T_launch itself"),
    "decompose.engine_markers_unmatched": (WARNING, "serving-engine-like step markers matched no known form"),
    "cache.corrupt_entry": (INFO, "a cache entry (parsed tables or analysis) could not be read; it was computed again"),
    "scale.rank_from_order": (INFO, "trace without rank metadata; rank taken from file order"),
    "scale.duplicate_rank": (WARNING, "two traces in one folder report the same rank"),
    "scale.file_skipped": (DATA_LOSS, "a trace of a folder failed and was skipped (--on-error skip)"),
    "scale.entry_skipped": (WARNING, "a folder entry with a trace name that is a dangling link, a link loop, "
                            "a FIFO/socket/device or unreadable: passed over, never opened"),
    "scale.world_size_mismatch": (WARNING, "traces of one run folder report different distributed world sizes"),
    "scale.runs_apart": (INFO, "traces of several runs (or of a run whose traces disagree) reported apart, "
                         "not added up; --combine-runs adds them up"),
    "scale.resumed": (INFO, "traces already in the output dataset, read back from its manifest, not analyzed again"),
    "scale.uncommitted_removed": (INFO, "dataset files of a task that died before its manifest row were removed"),
}


@dataclass
class Diagnostic:
    code: str
    count: int
    example: str
    severity: str


@dataclass
class Diagnostics:
    """Counts per code, with the first example message of each."""

    items: dict[str, Diagnostic] = field(default_factory=dict)

    def add(self, code: str, count: int = 1, example: str = "") -> None:
        if count <= 0:
            return
        severity = DIAGNOSTIC_CODES.get(code, (WARNING, ""))[0]
        found = self.items.get(code)
        if found is None:
            self.items[code] = Diagnostic(code, int(count), example, severity)
        else:
            found.count += int(count)
            if not found.example:
                found.example = example

    def count(self, code: str) -> int:
        found = self.items.get(code)
        return found.count if found else 0

    def merge(self, other: "Diagnostics") -> None:
        for diag in other.items.values():
            self.add(diag.code, diag.count, diag.example)

    def as_dict(self) -> dict[str, dict]:
        return {
            code: {"count": d.count, "severity": d.severity, "example": d.example}
            for code, d in sorted(self.items.items())
        }

    @classmethod
    def from_dict(cls, data: dict[str, dict]) -> "Diagnostics":
        diags = cls()
        for code, d in data.items():
            diags.add(code, d["count"], d.get("example", ""))
        return diags

    def __len__(self) -> int:
        return len(self.items)
