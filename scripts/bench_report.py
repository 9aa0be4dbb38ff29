#!/usr/bin/env python
"""Process CPU time of rendering the HTML report (``render_html``) of a few traces, best of three.

The analysis is done once per trace (``floor_us=4.5``, so no floor measurement) and not timed;
the first render of the process is shown apart (it pays imports). Usage::

    python scripts/bench_report.py [TRACE ...]

Without traces: the planted trace of the tests, AlexNet, the V100 ResNet step and
``mfu_2gpu_before.sqlite`` from ../shared/traces (or ``TAXBREAK_SHARED_TRACES``).
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's package and its tests' planted trace
SHARED = Path(os.environ.get("TAXBREAK_SHARED_TRACES", ROOT.parent / "shared" / "traces"))
DEFAULT = ("HolisticTraceAnalysis/tests/data/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
           "HolisticTraceAnalysis/tests/data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
           "nsys-ai/tests/fixtures/mfu_2gpu_before.sqlite")


def cpu_seconds(render) -> tuple[float, float, str]:
    """(first call, best of the next three) in process CPU seconds, and the page."""
    times, page = [], ""
    for _ in range(4):
        start = time.process_time()
        page = render()
        times.append(time.process_time() - start)
    return times[0], min(times[1:]), page


def main(argv: list[str]) -> int:
    from taxbreak.decompose import analyze
    from taxbreak.report.html import render_html
    from tests.report.traces import write_planted

    paths = [Path(p) for p in argv] or [write_planted(Path(tempfile.mkdtemp()) / "planted.json"),
                                        *(SHARED / rel for rel in DEFAULT)]
    for path in paths:
        analysis = analyze(path, floor_us=4.5)
        first, best, page = cpu_seconds(lambda: render_html(analysis, title=str(path)))
        print(f"{path.name[:48]:48s} first {first:.3f} s  best of 3 {best:.3f} s CPU  page {len(page) / 1e3:,.0f} kB")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
