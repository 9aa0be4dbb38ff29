"""Decomposition benchmark: build a synthetic Kineto trace, parse + decompose it in a fresh process.

    python scripts/bench_analyze.py --events 1000000 [--plain] [--out DIR] [--keep]
    python scripts/bench_analyze.py --tables DIR [--repeat 3]      # analyze only, stage by stage

With ``--tables`` the input is a ``TraceTables.to_parquet`` folder (parse once,
decompose many times): each of ``--repeat`` fresh processes reads the tables and
times every stage of ``analyze`` (wall and CPU); the script prints the median
of each figure and the peak RSS above the loaded tables.

The trace comes from ``taxbreak.synth.bigtrace.write_big_kineto``. A child
process imports taxbreak, parses the trace (``load_trace``, no cache) and runs
``analyze`` on the tables; it reports both wall times measured inside itself.
Peak RSS is the child's (``RUSAGE_CHILDREN.ru_maxrss``). Writes one JSON line
on stdout, with the CPU time (user + system) of each step — steadier than wall
time on a shared machine — and the 1-minute load average at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchutil import machine_line, timed_trace

_CHILD = """
import json, sys, time
from taxbreak.readers import load_trace
from taxbreak.decompose import analyze
t0, c0 = time.perf_counter(), time.process_time()
tables = load_trace(sys.argv[1])
t1, c1 = time.perf_counter(), time.process_time()
a = analyze(tables)
t2, c2 = time.perf_counter(), time.process_time()
s = a.summary["all"]
print(json.dumps({"parse_s": t1 - t0, "analyze_s": t2 - t1, "parse_cpu_s": c1 - c0, "analyze_cpu_s": c2 - c1,
                  "input_events": tables.meta.input_events,
                  "kernels": s["kernels"], "steps": s["steps"], "hdbi": s["hdbi"],
                  "partition_rows": len(a.host_partition)}))
"""


_STAGES_CHILD = """
import json, resource, sys, time
from taxbreak.trace.tables import TraceTables
import taxbreak.decompose.analysis as A
tables = TraceTables.from_parquet(sys.argv[1])
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
acc = {}

def timed(name, fn):
    def run(*args, **kwargs):
        t, c = time.perf_counter(), time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            wall, cpu = acc.get(name, (0.0, 0.0))
            acc[name] = (wall + time.perf_counter() - t, cpu + time.process_time() - c)
    return run

for name in ("build_views", "find_steps", "link", "build_kernels", "host_partition", "step_table", "phase_table",
             "build_ops"):
    setattr(A, name, timed(name, getattr(A, name)))
t, c = time.perf_counter(), time.process_time()
A.analyze(tables)
acc["analyze"] = (time.perf_counter() - t, time.process_time() - c)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"stages": acc, "tables_rss_mb": rss0 / 1024, "peak_rss_mb": peak / 1024,
                  "events": tables.meta.input_events}))
"""


def bench_tables(tables_dir: Path, repeat: int) -> dict:
    """Median wall/CPU of each ``analyze`` stage over ``repeat`` fresh processes reading ``tables_dir``."""
    runs = []
    for _ in range(repeat):
        proc = subprocess.run([sys.executable, "-c", _STAGES_CHILD, str(tables_dir)], capture_output=True, text=True,
                              check=True)
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    stages = {name: {"wall_s": round(statistics.median(r["stages"][name][0] for r in runs), 2),
                     "cpu_s": round(statistics.median(r["stages"][name][1] for r in runs), 2)}
              for name in runs[0]["stages"]}
    peak = statistics.median(r["peak_rss_mb"] for r in runs)
    base = statistics.median(r["tables_rss_mb"] for r in runs)
    return {"events": runs[0]["events"], "repeat": repeat, "stages": stages, "tables_rss_mb": round(base),
            "peak_rss_mb": round(peak), "analyze_extra_mb": round(peak - base),
            "load_avg_1m": round(os.getloadavg()[0], 1), "machine": machine_line()}


def bench(n_events: int, out_dir: Path, gzip: bool) -> dict:
    """Write the trace, parse and decompose it in a child process, return the measurements."""
    path = out_dir / (f"bigtrace_{n_events}.json" + (".gz" if gzip else ""))
    stats, write_s = timed_trace(path, n_events, gzip)
    env = dict(os.environ, TAXBREAK_CACHE_DIR=str(out_dir / "cache"))
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, check=True,
                          env=env)
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    child = json.loads(proc.stdout.strip().splitlines()[-1])
    total = child["parse_s"] + child["analyze_s"]
    return {"events": stats.events, "json_mb": round(stats.json_bytes / 1e6, 1), "gzip": gzip,
            "write_s": round(write_s, 2), "parse_s": round(child["parse_s"], 2),
            "analyze_s": round(child["analyze_s"], 2), "total_s": round(total, 2),
            "parse_cpu_s": round(child["parse_cpu_s"], 2), "analyze_cpu_s": round(child["analyze_cpu_s"], 2),
            "load_avg_1m": round(os.getloadavg()[0], 1),
            "events_per_s": round(stats.events / total), "peak_rss_mb": round(peak_kb / 1024),
            "kernels": child["kernels"], "steps": child["steps"], "hdbi": child["hdbi"],
            "machine": machine_line()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--plain", action="store_true", help="uncompressed JSON instead of .json.gz")
    parser.add_argument("--out", type=Path, default=None, help="directory for the trace (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the trace file")
    parser.add_argument("--tables", type=Path, default=None, help="time analyze stages on this Parquet tables folder")
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes for --tables (median reported)")
    args = parser.parse_args()
    if args.tables:
        print(json.dumps(bench_tables(args.tables, max(args.repeat, 1))))
        return
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        result = bench(args.events, args.out, gzip=not args.plain)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            result = bench(args.events, Path(tmp), gzip=not args.plain)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
