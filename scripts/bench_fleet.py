"""Fleet benchmark: many generated traces through ``--engine local`` and ``--engine dask``.

    python scripts/bench_fleet.py [--traces 200] [--events 100000] [--ranks 4] [--repeat 3]
                                  [--workers 2] [--out DIR] [--keep]

Writes ``--traces`` Kineto traces of ``--events`` events each (``write_big_kineto``), as
``traces/run-<i>/rank-<r>.pt.trace.json.gz`` with ``--ranks`` ranks per run (world size set, so
each folder is one run). Then, ``--repeat`` times and alternating the engines (local, dask,
dask, local, ...: the two see the same share of a machine that others also load), one child
process runs

    taxbreak analyze traces --engine E --workers N -o out-E-i --partitioned --no-cache

while a sampler thread reads the resident memory of every process below it (psutil when
installed, else /proc) every second (sampling more often costs the machine a visible share). Reported per engine: the child's wall time, the
``analyze_many`` time it prints, the peak RSS of each worker process (the children that
analyze traces: ``multiprocessing`` spawn children, nanny-spawned Dask workers included) and of
the parent, and the 1-minute load average; the Dask overhead per trace is
``(median dask - median local) / traces``, in wall time and in CPU time. Then the DuckDB queries of docs/scale.md
over the last dataset (median of 5, each in a fresh connection; ``--queries DATASET`` times
only those). One JSON document on stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchutil import machine_line

DOC = Path(__file__).resolve().parents[1] / "docs" / "scale.md"
DOC_SECTION = "### Querying across runs with DuckDB"
_ANALYZED = re.compile(r"Analyzed (\d+) of (\d+) traces in ([0-9.]+) s")


def write_fleet(root: Path, traces: int, events: int, ranks: int) -> dict:
    """The generated traces, ``ranks`` per run folder; returns counts, bytes and seconds."""
    from taxbreak.synth.bigtrace import write_big_kineto

    t0 = time.perf_counter()
    size = 0
    for i in range(traces):
        run, rank = divmod(i, ranks)
        folder = root / f"run-{run:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"rank-{rank}.pt.trace.json.gz"
        write_big_kineto(path, events, seed=i, rank=rank, world_size=ranks)
        size += path.stat().st_size
    return {"traces": traces, "events_each": events, "ranks_per_run": ranks,
            "gzip_bytes": size, "write_s": round(time.perf_counter() - t0, 1)}


def _rss_reader():
    try:
        import psutil
    except ImportError:
        return _proc_rss
    return lambda pid: _psutil_rss(psutil, pid)


def _psutil_rss(psutil, root_pid: int) -> dict[int, tuple[int, str]]:
    try:
        procs = psutil.Process(root_pid).children(recursive=True)
    except psutil.Error:
        return {}
    out = {}
    for p in procs:
        try:
            out[p.pid] = (p.memory_info().rss, " ".join(p.cmdline()))
        except psutil.Error:
            continue
    return out


def _proc_rss(root_pid: int) -> dict[int, tuple[int, str]]:
    """Descendants of ``root_pid`` and their RSS from /proc (no psutil)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    below, frontier = set(), {root_pid}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - below
        below |= frontier
    out = {}
    for pid in below:
        try:
            rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            out[pid] = (rss, Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode())
        except (OSError, ValueError):
            continue
    return out


class Sampler(threading.Thread):
    """Peak RSS of every process below one pid, sampled every ``period`` seconds."""

    def __init__(self, pid: int, period: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.pid, self.period, self.read = pid, period, _rss_reader()
        self.peaks: dict[int, tuple[int, str]] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(self.period):
            for pid, (rss, cmd) in self.read(self.pid).items():
                if rss > self.peaks.get(pid, (0, ""))[0]:
                    self.peaks[pid] = (rss, cmd)

    def worker_peaks_mb(self) -> list[float]:
        """Peaks of the processes that analyze traces (spawned children, not the resource tracker)."""
        return sorted((round(rss / 2**20) for rss, cmd in self.peaks.values()
                       if "spawn" in cmd and "resource_tracker" not in cmd), reverse=True)


def run_engine(engine: str, traces: Path, out: Path, workers: int) -> dict:
    """One ``taxbreak analyze`` of the fleet: wall, CPU of the whole process tree, peaks, load."""
    cmd = [sys.executable, "-m", "taxbreak", "analyze", str(traces), "--engine", engine,
           "--workers", str(workers), "-o", str(out), "--partitioned", "--no-cache"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ.copy())
    sampler = Sampler(proc.pid)
    sampler.start()
    err: list[bytes] = []
    drain = threading.Thread(target=lambda: err.append(proc.stderr.read()))
    drain.start()
    # wait4: the child's own usage plus every descendant it reaped (pool or Dask workers, nannies)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    drain.join()
    sampler.stop.set()
    sampler.join()
    stderr = b"".join(err).decode(errors="replace")
    found = _ANALYZED.search(stderr)
    if os.waitstatus_to_exitcode(status) != 0 or not found:
        raise SystemExit(f"{engine} failed ({status}):\n{stderr[-2000:]}")
    return {"engine": engine, "wall_s": round(wall, 2), "analyze_s": float(found.group(3)),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 1), "analyzed": int(found.group(1)),
            "worker_peak_rss_mb": sampler.worker_peaks_mb(), "load_1min": round(os.getloadavg()[0], 2)}


def documented_queries() -> list[str]:
    """The ```sql blocks of docs/scale.md's DuckDB section: the views, then the queries."""
    text = DOC.read_text()
    section = text[text.index(DOC_SECTION):]
    return re.findall(r"```sql\n(.*?)```", section[: section.index("\n### ", 1)], flags=re.S)


def time_queries(out: Path, repeat: int = 5) -> dict:
    """Median seconds of each documented query (a fresh DuckDB connection and views each time)
    and its row count."""
    import duckdb

    views, *queries = documented_queries()
    timings = {}
    for text in queries:
        seconds, cpu, rows = [], [], 0
        for _ in range(repeat):
            con = duckdb.connect()
            con.execute(views.replace("'OUT/", f"'{out}/"))
            t0, c0 = time.perf_counter(), time.process_time()  # CPU of every DuckDB thread: steadier under load
            rows = len(con.execute(text).fetchall())
            seconds.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            con.close()
        name = " ".join(text.split())[:60]
        timings[name] = {"median_s": round(statistics.median(seconds), 3),
                         "median_cpu_s": round(statistics.median(cpu), 3), "rows": rows}
    return timings


def _median(runs: list[dict], key: str) -> float:
    return round(statistics.median(r[key] for r in runs), 2)


def summarize(runs: list[dict], traces: int) -> dict:
    """Medians per engine and the Dask overhead, in wall time and in CPU time (the CPU seconds of
    the whole process tree hardly depend on what else loads the machine)."""
    by = {e: [r for r in runs if r["engine"] == e] for e in ("local", "dask")}
    med = {e: {k: _median(rs, k) for k in ("wall_s", "analyze_s", "cpu_s")} |
           {"worker_peak_rss_mb": max(max(r["worker_peak_rss_mb"] or [0]) for r in rs)}
           for e, rs in by.items() if rs}
    if "local" in med and "dask" in med:
        med["dask_overhead"] = {}
        for key in ("wall_s", "cpu_s"):
            extra = med["dask"][key] - med["local"][key]
            med["dask_overhead"][key] = {"per_trace_ms": round(1e3 * extra / traces, 1),
                                         "of_local": round(extra / med["local"][key], 3)}
    return med


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=200)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the traces and datasets")
    parser.add_argument("--queries", type=Path, default=None, metavar="DATASET",
                        help="only time the documented DuckDB queries over an existing dataset")
    args = parser.parse_args()
    if args.queries:
        print(json.dumps({"duckdb": time_queries(args.queries), "files": sum(1 for _ in args.queries.rglob("*.parquet")),
                          "load_1min": round(os.getloadavg()[0], 2)}, indent=1))
        return
    root = args.out or Path(tempfile.mkdtemp(prefix="taxbreak-fleet-"))
    traces = root / "traces"
    fleet = write_fleet(traces, args.traces, args.events, args.ranks) if not traces.exists() else {
        "traces": args.traces, "events_each": args.events, "reused": True}
    runs = []
    order = [("local", "dask") if i % 2 == 0 else ("dask", "local") for i in range(args.repeat)]
    for i, pair in enumerate(order):
        for engine in pair:
            out = root / f"out-{engine}-{i}"
            shutil.rmtree(out, ignore_errors=True)
            runs.append(run_engine(engine, traces, out, args.workers))
            print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    report = {"machine": machine_line(), "fleet": fleet, "runs": runs,
              "median": summarize(runs, args.traces), "duckdb": time_queries(root / f"out-dask-{len(order) - 1}"),
              "uptime": subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()}
    print(json.dumps(report, indent=1))
    if not args.keep and args.out is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
