"""Typed errors with stable codes.

Every fatal problem raises a subclass of :class:`TaxbreakError` carrying a
stable ``code`` (``json.truncated``), the ``path``, a ``location`` (byte
offset, event index, table row, TOML key) and a ``hint``. The CLI maps them to
one line on stderr and an exit code in one place (``taxbreak/cli/errors.py``):
1 for bad input, 2 for usage errors.

Codes are listed in :data:`ERROR_CODES`; tests check that every raised code is
registered there and documented in docs/trace-model.md.
"""
from __future__ import annotations

from dataclasses import dataclass

ERROR_CODES: dict[str, str] = {
    # input files
    "input.not_found": "the path does not exist",
    "input.empty": "the file is empty",
    "input.unreadable": "the file cannot be read (permissions, a directory, I/O error)",
    "input.too_large": "a small input (budget, manifest) is larger than it may be; it is not read",
    "format.unknown": "the content is neither Kineto JSON nor an Nsight Systems export",
    # outputs
    "output.unwritable": "an output file or folder cannot be written (missing parent folder, permissions, disk full)",
    "output.is_link": "the output is a symbolic link; taxbreak does not write through links",
    "output.is_input": "the output is an input of the same command; writing it would destroy the input",
    # Kineto JSON
    "gzip.truncated": "a gzip stream ends early or is corrupt",
    "json.invalid": "the content is not valid JSON",
    "json.truncated": "the JSON ends before the trace is complete",
    "json.encoding": "the bytes are not valid UTF-8",
    "kineto.no_events": "a JSON object without a traceEvents list",
    "kineto.wrong_type": "a field has the wrong JSON type (for example traceEvents is not a list)",
    "json.too_deep": "objects and lists nested deeper than the JSON depth bound",
    "json.too_long": "one event, string or run of spaces longer than the string bound",
    "json.duplicate_key": "a top-level key (traceEvents, deviceProperties...) appears twice",
    "gzip.too_large": "the gzip stream inflates beyond the decompressed-size bound",
    "gzip.ratio": "the gzip stream inflates beyond the ratio bound (a decompression bomb)",
    "kineto.time_range": "the events span more time than the span bound, or a base time beyond int64 ns",
    # Nsight Systems
    "nsys.not_an_export": "an SQLite file that is not an Nsight Systems export",
    "nsys.corrupt": "an SQLite file that cannot be read",
    "nsys.not_installed": "an .nsys-rep needs the nsys CLI to export it, and nsys is not on PATH",
    "nsys.export_failed": "nsys export failed",
    "nsys.uncommitted": "an export with a non-empty -journal or -wal file beside it (being written, or its writer died)",
    "nsys.unknown_schema": "an activity table without its start/end columns (a schema taxbreak does not know)",
    "nsys.time_range": "the export's events span more time than the span bound ($TAXBREAK_MAX_SPAN_S)",
    "nsys.query_limit": "reading the export ran past its SQLite work bound ($TAXBREAK_NSYS_MAX_STEPS)",
    "nsys.string_limit": "a string or blob in the export is longer than $TAXBREAK_NSYS_MAX_STRING_BYTES",
    "memory.exhausted": "the process ran out of memory (a memory cap or a machine too small for the trace)",
    # analysis / usage
    "usage.invalid": "invalid option or argument",
    "usage.step_pattern": "the --step-pattern regex does not compile",
    "analysis.unknown_phase": "Analysis.phase(name) for a phase the trace does not have",
    "budget.malformed": "the budget TOML cannot be parsed or a limit is not a valid comparison",
    "budget.unknown_metric": "a budget names a metric that the summary does not have",
    "budget.renamed_metric": "a budget names a metric by its old name (queue_wait_us, tklqt_us, gpu_idle_us)",
    "run.not_a_run": "the directory is neither a run directory nor a folder of traces",
    "run.no_traces": "a directory with no trace files",
    # capture / device
    "model.unknown": "an unknown model preset",
    "model.hf_unavailable": "hf:PATH needs the optional transformers package",
    "model.invalid": "a model configuration that cannot be built",
    "device.unavailable": "the command needs a CUDA device and none is present",
    "device.driver": "the CUDA driver API returned an error",
    "capture.nsys_missing": "--backend nsys needs nsys on PATH",
    "capture.failed": "the profiled workload failed",
    "replay.unsupported": "the op cannot be rebuilt from recorded shapes",
    "cache.corrupt": "a cache entry cannot be read",
    "scale.worker_failed": "a worker process analyzing one trace of a folder died or raised an unexpected error",
    "scale.nothing_analyzed": "every trace of a folder failed: nothing was analyzed",
    "engine.missing_extra": "the chosen engine or URL protocol needs an optional package that is not installed",
    "dataset.version_mismatch": "the output dataset was written by another taxbreak version or dataset format",
    # what-if
    "calibration.malformed": "a batching calibration JSON is invalid or misses a parameter",
}


@dataclass
class TaxbreakError(Exception):
    """Base of all fatal errors. ``exit_code`` 1 = bad input, 2 = usage."""

    code: str
    message: str
    path: str | None = None
    location: str | None = None
    hint: str | None = None

    exit_code = 1

    def __post_init__(self) -> None:
        super().__init__(self.one_line())

    def one_line(self) -> str:
        """``error[code]: path: message (location)`` without the hint."""
        where = f"{self.path}: " if self.path else ""
        loc = f" ({self.location})" if self.location else ""
        return f"error[{self.code}]: {where}{self.message}{loc}"

    def __str__(self) -> str:  # dataclass would otherwise print fields
        return self.one_line()


class TraceNotFoundError(TaxbreakError):
    """The input path does not exist or cannot be read."""


class TraceFormatError(TaxbreakError):
    """The input exists but is malformed (truncated, wrong types, not UTF-8)."""


class UnsupportedFormatError(TaxbreakError):
    """The input is not a format taxbreak reads."""


class ToolMissingError(TaxbreakError):
    """An external tool (nsys) or optional package is needed but absent."""


class DeviceUnavailableError(TaxbreakError):
    """The command needs a CUDA device and none is present."""


class CaptureError(TaxbreakError):
    """The profiled workload could not be built or run."""


class BudgetError(TaxbreakError):
    """A budget file is malformed or names an unknown metric (exit 2)."""

    exit_code = 2


class UsageError(TaxbreakError):
    """Invalid options or arguments (exit 2)."""

    exit_code = 2
