"""Parse-speed benchmark: build a synthetic Kineto trace, parse it in a fresh process.

    python scripts/bench_parse.py --events 1000000 [--keep] [--plain] [--out DIR]
    python scripts/bench_parse.py --trace PATH [--repeat 3]   # an existing trace (e.g. one kept earlier)

Reports the JSON size (uncompressed and on disk), the wall time of the parse
(``read_kineto``, no cache) measured inside the child and the child's CPU time
(user + system, imports included; the fairer figure when other work shares the
cores), events/s, and the peak
RSS of the child (``ru_maxrss`` from ``os.wait4``; the child
does nothing but import taxbreak and parse). Writes one JSON line per run on
stdout; with ``--repeat N`` a last line holds the medians.
"""
from __future__ import annotations

import argparse
import gzip as gzip_module
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from benchutil import machine_line, run_child, timed_trace

_CHILD = """
import json, sys, time
from taxbreak.readers.kineto import read_kineto
t0 = time.perf_counter()
tables = read_kineto(sys.argv[1])
wall = time.perf_counter() - t0
print(json.dumps({"parse_s": wall, "input_events": tables.meta.input_events, "rows": tables.counts()}))
"""


def bench(n_events: int, out_dir: Path, gzip: bool) -> dict:
    """Write the trace, parse it in a child process, return the measurements."""
    path = out_dir / (f"bigtrace_{n_events}.json" + (".gz" if gzip else ""))
    stats, write_s = timed_trace(path, n_events, gzip)
    return {**parse_in_child(path, stats.json_bytes), "write_s": round(write_s, 2)}


def parse_in_child(path: Path, json_bytes: int | None = None) -> dict:
    """Parse ``path`` in a fresh Python process; wall time inside it, its CPU time and peak RSS."""
    run = run_child([sys.executable, "-c", _CHILD, str(path)])
    if run["rc"] != 0:
        raise SystemExit(f"the parse child failed with exit code {run['rc']}")
    usage = run["usage"]
    peak_kb = usage.ru_maxrss
    child = json.loads(run["stdout"].decode().strip().splitlines()[-1])
    json_bytes = json_bytes or _json_size(path)
    return {
        "events": child["input_events"],
        "json_mb": round(json_bytes / 1e6, 1),
        "file_mb": round(path.stat().st_size / 1e6, 1),
        "gzip": path.suffix == ".gz",
        "parse_s": round(child["parse_s"], 2),
        # CPU time of the whole child (imports included): fairer than wall time on a shared machine
        "child_cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "events_per_s": round(child["input_events"] / child["parse_s"]),
        "peak_rss_mb": round(peak_kb / 1024, 1),
        "rss_over_json": round(peak_kb * 1024 / json_bytes, 2),
        "rows": child["rows"],
        "machine": machine_line(),
        "load_1min": round(os.getloadavg()[0], 2),
        "path": str(path),
    }


def _json_size(path: Path) -> int:
    """Uncompressed size: the gzip trailer's ISIZE is modulo 2**32, so count instead."""
    if path.suffix != ".gz":
        return path.stat().st_size
    size = 0
    with gzip_module.open(path, "rb") as fh:
        while block := fh.read(1 << 24):
            size += len(block)
    return size


def _medians(runs: list[dict]) -> dict:
    keys = ("parse_s", "child_cpu_s", "peak_rss_mb")
    return {"median_of": len(runs), **{k: statistics.median(r[k] for r in runs) for k in keys}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keep", action="store_true", help="keep the trace file")
    parser.add_argument("--plain", action="store_true", help="write plain JSON instead of .json.gz")
    parser.add_argument("--out", type=Path, default=None, help="directory for the trace (default: a temp dir)")
    parser.add_argument("--trace", type=Path, default=None, help="parse this existing trace instead of writing one")
    parser.add_argument("--repeat", type=int, default=1, help="parse runs (the trace is written once)")
    args = parser.parse_args()
    if args.trace is not None:
        runs = [parse_in_child(args.trace) for _ in range(args.repeat)]
    else:
        out = args.out or Path(tempfile.mkdtemp(prefix="taxbreak-bench-"))
        out.mkdir(parents=True, exist_ok=True)
        runs = [bench(args.events, out, gzip=not args.plain)]
        runs += [parse_in_child(Path(runs[0]["path"])) for _ in range(args.repeat - 1)]
        if not args.keep:
            Path(runs[0]["path"]).unlink()
    for run in runs:
        print(json.dumps(run))
    if len(runs) > 1:
        print(json.dumps(_medians(runs)))


if __name__ == "__main__":
    main()
