#!/usr/bin/env python
"""Resident memory of ``analyze`` stage by stage: where the peak of a cold decomposition lies.

    TAXBREAK_NO_CACHE=1 python scripts/bench_memory_stages.py TRACE_OR_TABLES_DIR

A trace file is parsed inside ``analyze`` (as ``taxbreak analyze`` does, so the tables are
let go once the views are built only when the parse cache is on); a folder is read with
``TraceTables.from_parquet`` and stays in memory. The high-water mark is reset after the
imports (``/proc/self/clear_refs``, Linux); each stage then prints the RSS when it starts and
ends and the high-water mark so far, in MiB. Stages that run in two threads (the host
partition beside the links and kernels, the phase table beside the step table) overlap.
"""
from __future__ import annotations

import sys


def rss_mib() -> tuple[int, int]:
    """(current RSS, high-water mark) of this process in MiB."""
    fields = dict(line.split(":", 1) for line in open("/proc/self/status") if line.startswith(("VmRSS", "VmHWM")))
    return int(fields["VmRSS"].split()[0]) // 1024, int(fields["VmHWM"].split()[0]) // 1024


STAGES = ("build_views", "find_steps", "link", "op_chain", "build_kernels", "host_partition",
          "take_stalls_out_of_t_py", "attribute_idle", "build_ops", "scope_inputs", "step_table", "phase_table")


def main() -> None:
    import pandas  # noqa: F401 - imported before the reset: the floor is the imports
    import taxbreak.decompose.analysis as analysis
    import taxbreak.readers.kineto  # noqa: F401
    from taxbreak.trace.tables import TraceTables

    source = sys.argv[1]
    inputs = source if source.endswith((".json", ".gz", ".sqlite")) else TraceTables.from_parquet(source)
    print(f"{'after imports' if isinstance(inputs, str) else 'tables loaded'}: RSS {rss_mib()[0]} MiB")

    def traced(name, fn):
        def run(*args, **kwargs):
            start = rss_mib()[0]
            out = fn(*args, **kwargs)
            now, peak = rss_mib()
            print(f"{name:24s} start {start:5d}  end {now:5d}  high-water {peak:5d}", flush=True)
            return out
        return run

    for name in STAGES:
        setattr(analysis, name, traced(name, getattr(analysis, name)))
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    analysis.analyze(inputs)
    print(f"end: RSS {rss_mib()[0]} MiB, high-water {rss_mib()[1]} MiB")


if __name__ == "__main__":
    main()
