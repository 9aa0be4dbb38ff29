"""Large and multi-rank traces: many files in parallel, combined summaries,
result caching and hive-partitioned Parquet for fleets (docs/scale.md).

Names are imported on first use so that ``import taxbreak.scale.discover``
(the CLI's folder check) does not pull in pandas and the decomposer.
"""
from __future__ import annotations

from ..trace.lazy import lazy_exports

_EXPORTS = {
    "FileResult": "many", "ManyResult": "many", "analyze_many": "many",
    "cached_analyze": "analysis_cache",
    "combine_metrics": "combine", "combine_summaries": "combine", "hdbi": "combine",
    "find_traces": "discover", "is_run_dir": "discover", "is_trace_folder": "discover",
    "uncompressed_bytes": "discover",
    "read_partitioned": "partition", "open_dataset": "dataset", "write_partitions": "partition",
    "estimate_peak_bytes": "workers", "plan_workers": "workers",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_exports(__name__, _EXPORTS)
