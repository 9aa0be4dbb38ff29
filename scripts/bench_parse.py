"""Parse-speed benchmark: build a synthetic Kineto trace, parse it in a fresh process.

    python scripts/bench_parse.py --events 1000000 [--keep] [--plain] [--out DIR]

Reports the JSON size (uncompressed and on disk), the wall time of the parse
(``read_kineto``, no cache) measured inside the child and the child's CPU time
(user + system, imports included; the fairer figure when other work shares the
cores), events/s, and the peak
RSS of the child (``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss``; the child
does nothing but import taxbreak and parse). Writes one JSON line on stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from taxbreak.synth.bigtrace import write_big_kineto

_CHILD = """
import json, sys, time
from taxbreak.readers.kineto import read_kineto
t0 = time.perf_counter()
tables = read_kineto(sys.argv[1])
wall = time.perf_counter() - t0
print(json.dumps({"parse_s": wall, "input_events": tables.meta.input_events, "rows": tables.counts()}))
"""


def _machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}"


def bench(n_events: int, out_dir: Path, gzip: bool) -> dict:
    """Write the trace, parse it in a child process, return the measurements."""
    path = out_dir / (f"bigtrace_{n_events}.json" + (".gz" if gzip else ""))
    t0 = time.perf_counter()
    stats = write_big_kineto(path, n_events, gzip=gzip)
    write_s = time.perf_counter() - t0
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak_kb = after.ru_maxrss
    child = json.loads(proc.stdout.strip().splitlines()[-1])
    return {
        "events": stats.events,
        "json_mb": round(stats.json_bytes / 1e6, 1),
        "file_mb": round(path.stat().st_size / 1e6, 1),
        "gzip": gzip,
        "write_s": round(write_s, 2),
        "parse_s": round(child["parse_s"], 2),
        # CPU time of the whole child (imports included): fairer than wall time on a shared machine
        "child_cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2),
        "events_per_s": round(child["input_events"] / child["parse_s"]),
        "peak_rss_mb": round(peak_kb / 1024, 1) if peak_kb > before.ru_maxrss else None,
        "rss_over_json": round(peak_kb * 1024 / stats.json_bytes, 2) if peak_kb > before.ru_maxrss else None,
        "rows": child["rows"],
        "machine": _machine(),
        "path": str(path),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keep", action="store_true", help="keep the trace file")
    parser.add_argument("--plain", action="store_true", help="write plain JSON instead of .json.gz")
    parser.add_argument("--out", type=Path, default=None, help="directory for the trace (default: a temp dir)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="taxbreak-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    result = bench(args.events, out, gzip=not args.plain)
    if not args.keep:
        Path(result["path"]).unlink()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
