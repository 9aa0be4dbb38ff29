"""Parse-speed benchmark: build a synthetic Kineto trace, parse it in a fresh process.

    python scripts/bench_parse.py --events 1000000 [--keep] [--plain] [--out DIR]
    python scripts/bench_parse.py --trace PATH [--repeat 3]   # an existing trace (e.g. one kept earlier)
    python scripts/bench_parse.py --floor [--events N | --trace PATH] [--repeat 5]

``--floor`` compares, each in a fresh one-process child (``TAXBREAK_PARSE_WORKERS=0``)
and as the median of ``--repeat`` runs: the single-core floor (inflate alone, and
inflate + the compiled scanner's one pass over ~2 MB chunks, no table assembly),
the reader with the compiled scanner (``kineto-c``) and the reader without it
(``TAXBREAK_NO_EXT=1``, ``kineto-py``). It prints those medians as a table (wall
and CPU seconds, the machine's load) and the reader's distance from the floor.

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


_FLOOR_CHILD = """
import json, re, sys, time
try:
    from isal import isal_zlib as inflate_lib
except ImportError:
    import zlib as inflate_lib
from taxbreak.readers import _kineto_scan

CUT = re.compile(rb"\\}\\s*,\\s*\\{")
CHUNK = 2 << 20

def blocks(path):
    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\\x1f\\x8b"
        fh.seek(0)
        inflater = inflate_lib.decompressobj(16 + inflate_lib.MAX_WBITS) if gz else None
        while block := fh.read(1 << 18):
            yield inflater.decompress(block) if gz else block

def inflate_only(path):
    return sum(len(b) for b in blocks(path))

def inflate_and_scan(path):
    buf, events, started = bytearray(), 0, False
    for block in blocks(path):
        buf += block
        if not started:
            start = buf.find(b"[")
            if start < 0:
                continue
            del buf[: start + 1]
            started = True
        while len(buf) > 2 * CHUNK and (m := CUT.search(buf, CHUNK)):
            found = _kineto_scan.scan_chunk(b"[" + buf[: m.start() + 1] + b"]", 64, 898)
            events += found[0] if found else 0
            del buf[: m.end() - 1]
    end = buf.rfind(b"]")
    found = _kineto_scan.scan_chunk(b"[" + buf[: end + 1], 64, 898)
    return events + (found[0] if found else 0)

for name, fn in (("inflate", inflate_only), ("inflate_scan", inflate_and_scan)):
    t0, c0 = time.perf_counter(), time.process_time()
    value = fn(sys.argv[1])
    print(json.dumps({"step": name, "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                      "value": value}))
"""

_READER_CHILD = """
import json, sys, time
from taxbreak.readers.kineto import read_kineto
t0, c0 = time.perf_counter(), time.process_time()
tables = read_kineto(sys.argv[1], parse_workers=0)
print(json.dumps({"step": tables.meta.extra["reader"], "wall_s": time.perf_counter() - t0,
                  "cpu_s": time.process_time() - c0, "value": tables.meta.input_events}))
"""


def floor_runs(path: Path, repeat: int) -> dict[str, list[dict]]:
    """``repeat`` runs of the floor and of both readers, each step in a fresh child."""
    runs: dict[str, list[dict]] = {}
    base_env = {**os.environ, "TAXBREAK_PARSE_WORKERS": "0"}
    for _ in range(repeat):
        for code, env in ((_FLOOR_CHILD, base_env), (_READER_CHILD, base_env),
                          (_READER_CHILD, {**base_env, "TAXBREAK_NO_EXT": "1"})):
            run = run_child([sys.executable, "-c", code, str(path)], env=env)
            if run["rc"] != 0:
                raise SystemExit(f"a floor child failed: {run['stderr'].decode()[-2000:]}")
            for line in run["stdout"].decode().split("\n"):
                if line.strip():
                    step = json.loads(line)
                    runs.setdefault(step["step"], []).append({**step, "load_1min": os.getloadavg()[0]})
    return runs


def print_floor(path: Path, runs: dict[str, list[dict]]) -> None:
    """The medians as a table, and the reader's distance from the floor."""
    med = {step: {k: statistics.median(r[k] for r in rows) for k in ("wall_s", "cpu_s", "load_1min")}
           for step, rows in runs.items()}
    events = runs.get("kineto-py", runs.get("kineto-c"))[0]["value"]
    print(f"trace: {path} ({events:,} events); machine: {machine_line()}; median of {len(runs['inflate'])} runs")
    print(f"{'step':<14}{'wall s':>9}{'cpu s':>9}{'load':>7}")
    for step, m in med.items():
        print(f"{step:<14}{m['wall_s']:>9.2f}{m['cpu_s']:>9.2f}{m['load_1min']:>7.1f}")
    floor = med["inflate_scan"]
    for reader in ("kineto-c", "kineto-py"):
        if reader in med:
            print(f"{reader} / floor: {med[reader]['wall_s'] / floor['wall_s']:.1f}x wall, "
                  f"{med[reader]['cpu_s'] / floor['cpu_s']:.1f}x cpu")
    print(json.dumps({"floor_medians": med, "events": events}))


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
    parser.add_argument("--floor", action="store_true",
                        help="the single-core floor against both readers (see the module doc)")
    args = parser.parse_args()
    if args.floor:
        path = args.trace
        if path is None:
            out = args.out or Path(tempfile.mkdtemp(prefix="taxbreak-bench-"))
            out.mkdir(parents=True, exist_ok=True)
            path = out / (f"bigtrace_{args.events}.json" + ("" if args.plain else ".gz"))
            timed_trace(path, args.events, not args.plain)
        print_floor(path, floor_runs(path, args.repeat))
        if args.trace is None and not args.keep:
            path.unlink()
        return
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
