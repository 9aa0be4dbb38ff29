"""``Analysis``: the result of ``analyze()``, a summary and the frames of one trace.

Kept apart from the decomposer (decompose/analysis.py) so that a result served by
the analysis cache, and its JSON, need neither pandas nor the decomposer's modules
(docs/performance.md, "Start-up"): the frames are pandas DataFrames, made when read.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from ..trace.fileio import atomic_output, output_target, write_output
from .accessors import PhaseValues, phase_names, phase_values
from .reprs import analysis_repr, analysis_repr_html

if TYPE_CHECKING:
    import pandas as pd

    from ..trace.tables import TraceTables

FRAMES = ("kernels", "steps", "phases", "ops", "host_partition", "idle", "op_accounts", "idle_by_cause", "devices")
OUTPUT_FILES = (*(f"{name}.parquet" for name in FRAMES), "summary.json")  # what Analysis.to_parquet writes


@dataclass(repr=False)
class Analysis:
    """The decomposition of one trace (attributes in docs/architecture.md)."""

    kernels: pd.DataFrame
    steps: pd.DataFrame
    phases: pd.DataFrame
    ops: pd.DataFrame
    host_partition: pd.DataFrame
    summary: dict
    tables: TraceTables = field(repr=False)
    idle: pd.DataFrame = field(repr=False)  # GPU idle pieces by cause (decompose/idle.py)
    op_accounts: pd.DataFrame = field(repr=False)  # host time of each launching root op (decompose/op_chain.py)

    def to_parquet(self, out_dir: str | Path) -> list[Path]:
        """Write every frame of ``FRAMES`` as Parquet, and ``summary.json``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for name in OUTPUT_FILES:
            output_target(out / name)  # a link among them refuses the whole output before any file is written
        written = []
        for name in FRAMES:
            path = out / f"{name}.parquet"
            with atomic_output(path) as tmp:  # never through a link, never half a file (docs/reliability.md)
                getattr(self, name).to_parquet(tmp, index=False)
            written.append(path)
        write_output(out / "summary.json", self.to_json_bytes())
        return written + [out / "summary.json"]

    def to_json(self, indent: int | None = 1) -> str:
        """The summary as JSON (unmeasured values are ``null``).

        Encoded by msgspec: the per-step list makes the summary ~5 MB at 1 M
        events, which the stdlib encoder takes 0.24 s over, msgspec 0.025 s.
        """
        return self.to_json_bytes(indent).decode()

    def to_json_bytes(self, indent: int | None = 1) -> bytes:
        """:meth:`to_json` as UTF-8 bytes: what a file or a pipe gets, without the
        text copy (the summary of a 10 M-event trace is ~100 MB of JSON)."""
        data = msgspec.json.encode(self.summary, enc_hook=_json_default)
        return msgspec.json.format(data, indent=indent) if indent else data

    @property
    def idle_by_cause(self) -> pd.DataFrame:
        """Device idle µs per cause of the whole trace, each phase and each step, summed over devices
        (``device`` <NA>) and per device: one row per (scope, device, cause) (decompose/nested.py)."""
        from .nested import idle_by_cause_frame  # pandas: on use

        return idle_by_cause_frame(self.summary)

    @property
    def devices(self) -> pd.DataFrame:
        """Busy and idle µs per device of the whole trace, each phase and each step: one row per
        (scope, device) (decompose/nested.py)."""
        from .nested import devices_frame  # pandas: on use

        return devices_frame(self.summary)

    @property
    def phase_names(self) -> list[str]:
        """``"all"`` then the phases of this trace (``unknown`` for a trace without taxbreak markers)."""
        return phase_names(self.summary)

    def phase(self, name: str = "all") -> PhaseValues:
        """The typed values of one phase, or of the whole trace (``"all"``); docs/architecture.md.

        Raises:
            UnknownPhaseError: ``analysis.unknown_phase`` (a ``KeyError`` too), listing the known phases.
        """
        return phase_values(self.summary, name)

    def __repr__(self) -> str:
        return analysis_repr(self)

    def _repr_html_(self) -> str:
        return analysis_repr_html(self)


def _json_default(value):
    # NumPy and pandas scalars can only be in the summary once their module is loaded:
    # a cached summary (plain JSON values) is encoded without importing either
    numpy, pandas = sys.modules.get("numpy"), sys.modules.get("pandas")
    if numpy is not None and isinstance(value, numpy.integer):
        return int(value)
    if numpy is not None and isinstance(value, numpy.floating):
        return float(value)
    if pandas is not None and value is pandas.NA:
        return None
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
