#!/usr/bin/env python
"""Wall time and peak RSS of taxbreak (and Holistic Trace Analysis) on synthetic Kineto traces.

For each size (default 100k, 1m, 10m events) this builds a synthetic trace with
``taxbreak.synth.bigtrace.write_big_kineto`` (streamed, gzip optional; reused
when already there) and measures, each in a fresh subprocess:

* the start-up floor: importing the CLI and the decomposer (no trace)
* ``taxbreak info TRACE``
* ``taxbreak analyze TRACE`` cold (empty parse cache) and cached (second run)
* ``taxbreak convert TRACE``
* Holistic Trace Analysis: ``TraceAnalysis(trace_dir=...)`` over a folder holding
  the trace, then ``get_cuda_kernel_launch_stats()``, when an interpreter with
  ``hta`` is given (``--hta-python``) or the current one has it.

Peak RSS is the child's ``ru_maxrss`` from ``os.wait4`` (the child and the
descendants it waited for). Every figure is the median of ``--repeat`` runs.

Usage::

    python scripts/bench.py --sizes 100k,1m --repeat 3 --json bench.json
    python scripts/bench.py --sizes 10m --repeat 1 --no-hta
    python scripts/bench.py --sizes 1m --cprofile 1m      # where analyze spends its time
    python scripts/bench.py --sizes 100k --stages 1m      # parse / analyze / cache writes, one process

HTA in its own environment: HTA 0.5.0 fails under pandas 3 (``TypeError: Invalid value
... for dtype 'int16'`` in ``hta/common/trace.py`` ``transform_correlation_to_index``) and
imports psutil without declaring it; it pulls jupyterlab but leaves torch alone::

    python -m venv --system-site-packages ~/.venvs/hta
    ~/.venvs/hta/bin/pip install holistictraceanalysis==0.5.0 psutil "pandas<3"
    python scripts/bench.py --hta-python ~/.venvs/hta/bin/python
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchutil import run_child

SIZES = {"100k": 100_000, "1m": 1_000_000, "10m": 10_000_000}

HTA_CODE = r"""
import os, sys, tempfile, time
from hta.trace_analysis import TraceAnalysis
trace = os.path.abspath(sys.argv[1])
folder = tempfile.mkdtemp(prefix="hta-bench-")
suffix = ".json.gz" if trace.endswith(".gz") else ".json"
os.symlink(trace, os.path.join(folder, "rank-0" + suffix))
analysis = TraceAnalysis(trace_dir=folder)
stats = analysis.get_cuda_kernel_launch_stats()
print("hta_kernels", sum(len(df) for df in stats.values()), file=sys.stderr)
"""

STARTUP_CODE = "import taxbreak.cli.main, taxbreak.scale.analysis_cache"

STAGES_CODE = r"""
import os, sys, tempfile, time, resource
os.environ["TAXBREAK_CACHE_DIR"] = tempfile.mkdtemp()
def peak(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t = time.perf_counter()
from taxbreak.readers import load_trace
from taxbreak.decompose import analyze
print(f"imports {time.perf_counter() - t:.2f} s, peak {peak():.0f} MiB")
t = time.perf_counter(); tables = load_trace(sys.argv[1], use_cache=False)
print(f"parse {time.perf_counter() - t:.2f} s, peak {peak():.0f} MiB")
print("table MiB", {n: round(tables.table(n).nbytes / 2**20) for n in tables.counts()})
t = time.perf_counter(); result = analyze(tables)
print(f"analyze {time.perf_counter() - t:.2f} s, peak {peak():.0f} MiB")
out = tempfile.mkdtemp()
t = time.perf_counter(); tables.to_parquet(out + "/t"); print(f"tables.to_parquet {time.perf_counter() - t:.2f} s")
t = time.perf_counter(); result.to_parquet(out + "/a"); print(f"analysis.to_parquet {time.perf_counter() - t:.2f} s")
"""

BUILD_CODE = r"""
import sys
from taxbreak.synth.bigtrace import write_big_kineto
write_big_kineto(sys.argv[1], int(sys.argv[2]), seed=0, gzip=sys.argv[3] == "1")
"""


def measure(cmd: list[str], env: dict | None = None) -> dict:
    """Run ``cmd`` to completion; its wall time (s), peak RSS (bytes) and exit code."""
    child = run_child(cmd, env, stdout=subprocess.DEVNULL)
    if child["rc"] != 0:
        print(f"  ! exit {child['rc']}: {' '.join(cmd)}\n{child['stderr'].decode(errors='replace')[-2000:]}",
              file=sys.stderr)
    return {"wall_s": child["wall_s"], "peak_rss_bytes": child["usage"].ru_maxrss * 1024, "rc": child["rc"]}


def median_of(runs: list[dict]) -> dict:
    ok = [r for r in runs if r["rc"] == 0]
    if not ok:
        return {"wall_s": None, "peak_rss_bytes": None, "rc": runs[-1]["rc"], "runs": len(runs)}
    return {"wall_s": statistics.median(r["wall_s"] for r in ok), "best_wall_s": min(r["wall_s"] for r in ok),
            "peak_rss_bytes": int(statistics.median(r["peak_rss_bytes"] for r in ok)),
            "rc": 0, "runs": len(ok), "all_wall_s": [round(r["wall_s"], 3) for r in ok]}


def build_trace(work: Path, n_events: int, use_gzip: bool) -> Path:
    path = work / f"kineto_{n_events}.json{'.gz' if use_gzip else ''}"
    if not path.exists():
        tmp = path.with_name(".building-" + path.name)
        print(f"building {path.name} ...", file=sys.stderr)
        result = measure([sys.executable, "-c", BUILD_CODE, str(tmp), str(n_events), "1" if use_gzip else "0"])
        if result["rc"] != 0:
            sys.exit(f"could not build {path}")
        tmp.rename(path)
    return path


def json_bytes(path: Path) -> int:
    from taxbreak.scale.discover import uncompressed_bytes

    return uncompressed_bytes(path)


def taxbreak_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "taxbreak", *args]


def bench_taxbreak(trace: Path, repeat: int, work: Path, commands: set[str] | None = None) -> dict:
    """info, analyze cold, analyze cached, convert: medians over ``repeat`` runs (``commands``: only those)."""
    runs: dict[str, list[dict]] = {"startup": [], "info": [], "analyze_cold": [], "analyze_cached": [],
                                   "convert": []}
    if commands:
        return {name: median_of(r) for name, r in _some_commands(trace, repeat, work, commands).items()}
    for _ in range(repeat):
        # interpreter + CLI import (pandas, pyarrow, the decomposer): the floor under every command
        runs["startup"].append(measure([sys.executable, "-c", STARTUP_CODE]))
        cache = Path(tempfile.mkdtemp(prefix="tb-cache-", dir=work))
        env = dict(os.environ, TAXBREAK_CACHE_DIR=str(cache))
        runs["analyze_cold"].append(measure(taxbreak_cmd("analyze", str(trace)), env))
        runs["analyze_cached"].append(measure_cached(trace, env, cache))
        shutil.rmtree(cache, ignore_errors=True)
        env_cold = dict(os.environ, TAXBREAK_CACHE_DIR=str(cache))
        runs["info"].append(measure(taxbreak_cmd("info", str(trace)), env_cold))
        shutil.rmtree(cache, ignore_errors=True)
        out = work / "convert-out"
        runs["convert"].append(measure(taxbreak_cmd("convert", str(trace), "-o", str(out)), env_cold))
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)
    return {name: median_of(r) for name, r in runs.items()}


def _some_commands(trace: Path, repeat: int, work: Path, commands: set[str]) -> dict[str, list[dict]]:
    """Only ``startup`` and/or ``analyze_cold`` (the figures compared with HTA), for the largest traces."""
    runs: dict[str, list[dict]] = {name: [] for name in ("startup", "analyze_cold") if name in commands}
    for _ in range(repeat):
        if "startup" in runs:
            runs["startup"].append(measure([sys.executable, "-c", STARTUP_CODE]))
        if "analyze_cold" in runs:
            cache = Path(tempfile.mkdtemp(prefix="tb-cache-", dir=work))
            env = dict(os.environ, TAXBREAK_CACHE_DIR=str(cache))
            runs["analyze_cold"].append(measure(taxbreak_cmd("analyze", str(trace)), env))
            shutil.rmtree(cache, ignore_errors=True)
    return runs


def _analysis_entries(cache: Path) -> int:
    folder = cache / "analysis"
    return len(list(folder.iterdir())) if folder.is_dir() else 0


def measure_cached(trace: Path, env: dict, cache: Path, tries: int = 3) -> dict:
    """A second ``analyze`` that really hits the analysis cache.

    The cache key covers the decomposer's source files, so an edit to them while
    the cold run was going makes the next run a miss (it stores a new entry);
    such a run is not a cached measurement and is repeated, and counted.
    """
    result: dict = {}
    for attempt in range(tries):
        before = _analysis_entries(cache)
        result = measure(taxbreak_cmd("analyze", str(trace)), env)
        result["misses"] = attempt
        if _analysis_entries(cache) == before:
            return result
    result["rc"] = result["rc"] or -1  # never hit: not a cached figure
    return result


def bench_hta(trace: Path, repeat: int, hta_python: str) -> dict:
    return median_of([measure([hta_python, "-c", HTA_CODE, str(trace)]) for _ in range(repeat)])


def ratio(other: dict, ours: dict) -> float | None:
    """Median over median of the other tool's wall time and taxbreak's (None if either failed)."""
    return other["wall_s"] / ours["wall_s"] if other["wall_s"] and ours["wall_s"] else None


def worst_ratio(other: dict, ours: dict) -> float | None:
    """The other tool's fastest run over taxbreak's slowest: the ratio no run went below."""
    if not other.get("all_wall_s") or not ours.get("all_wall_s"):
        return None
    return min(other["all_wall_s"]) / max(ours["all_wall_s"])


def find_hta_python(explicit: str | None) -> str | None:
    default_venv = str(Path("~/.venvs/hta/bin/python").expanduser())
    candidates = [explicit] if explicit else [sys.executable, default_venv]
    for python in candidates:
        if python and Path(python).exists():
            probe = subprocess.run([python, "-c", "import hta.trace_analysis"], capture_output=True)
            if probe.returncode == 0:
                return python
    return None


def machine() -> dict:
    model = ""
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    for line in lscpu.splitlines():
        if line.startswith("Model name:"):
            model = line.split(":", 1)[1].strip()
    mem_kb = 0
    with open("/proc/meminfo") as fh:
        mem_kb = int(next(line for line in fh if line.startswith("MemTotal:")).split()[1])
    return {"nproc": os.cpu_count(), "cpu_model": model, "mem_total_gib": round(mem_kb / 1024**2, 1),
            "python": platform.python_version(), "load_avg_1m": os.getloadavg()[0]}


def cprofile(trace: Path, work: Path, top: int = 40) -> str:
    """cProfile of a cold ``taxbreak analyze``, sorted by cumulative time."""
    cache = Path(tempfile.mkdtemp(prefix="tb-cache-", dir=work))
    env = dict(os.environ, TAXBREAK_CACHE_DIR=str(cache))
    prof = work / "analyze.prof"
    subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "taxbreak", "analyze", str(trace)],
                   env=env, stdout=subprocess.DEVNULL, check=False)
    shutil.rmtree(cache, ignore_errors=True)
    code = f"import pstats; pstats.Stats({str(prof)!r}).sort_stats('cumulative').print_stats({top})"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout


def render(results: list[dict], host: dict) -> str:
    """A Markdown table: one row per (size, tool)."""
    lines = [f"Machine: {host['nproc']} CPUs ({host['cpu_model']}), {host['mem_total_gib']} GiB, "
             f"Python {host['python']}, 1-min load at start {host['load_avg_1m']:.2f}.", "",
             "| events | JSON MB | file MB | command | wall s (median) | best s | peak RSS MB | M events/s |",
             "|---:|---:|---:|---|---:|---:|---:|---:|"]
    for r in results:
        for name, m in r["measures"].items():
            wall = m["wall_s"]
            rss = m["peak_rss_bytes"]
            rate = f"{r['events'] / wall / 1e6:.2f}" if wall and name != "startup" else "–"
            lines.append(f"| {r['events']:,} | {r['json_bytes'] / 1e6:.0f} | {r['file_bytes'] / 1e6:.1f} | {name} | "
                         f"{wall:.2f} | {m.get('best_wall_s', wall):.2f} | {rss / 1e6:.0f} | {rate} |" if wall else
                         f"| {r['events']:,} | | | {name} | failed (exit {m['rc']}) | | | |")
        for key, label in (("hta", "HTA 0.5.0"), ("traceinsight", "traceinsight")):
            times = r.get(f"{key}_over_analyze")
            if times:
                worst = r.get(f"{key}_over_analyze_worst")
                lines.append(f"| | | | **{label} / taxbreak analyze (cold) wall** | **{times:.1f}x** | "
                             f"{worst:.1f}x worst | | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100k,1m,10m", help="comma list of 100k,1m,10m or an event count")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work-dir", default=str(Path(tempfile.gettempdir()) / "taxbreak-bench"))
    parser.add_argument("--no-gzip", action="store_true", help="write plain JSON traces")
    parser.add_argument("--hta-python", help="interpreter with holistictraceanalysis installed")
    parser.add_argument("--no-hta", action="store_true")
    parser.add_argument("--ti-python", help="interpreter with traceinsight (HTA's newest release) installed")
    parser.add_argument("--hta-max-events", type=int, default=2_000_000,
                        help="skip HTA above this size (it needs ~1.3 GB RSS per 1M events)")
    parser.add_argument("--commands", help="comma list: only these of startup,analyze_cold (large traces)")
    parser.add_argument("--cprofile", help="also profile a cold analyze at this size")
    parser.add_argument("--stages", help="also time parse / analyze / cache writes in one process at this size")
    parser.add_argument("--json", help="write all results here")
    parser.add_argument("--render", nargs="+", metavar="JSON", help="only print the table of saved results")
    args = parser.parse_args(argv)
    if args.render:
        saved = [json.loads(Path(f).read_text()) for f in args.render]
        print(render([r for s in saved for r in s["results"]], saved[0]["machine"]))
        return 0

    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    host = machine()
    hta_python = None if args.no_hta else find_hta_python(args.hta_python)
    results = []
    for size in args.sizes.split(","):
        n = SIZES.get(size.strip().lower()) or int(size)
        trace = build_trace(work, n, not args.no_gzip)
        row = {"events": n, "trace": str(trace), "file_bytes": trace.stat().st_size, "json_bytes": json_bytes(trace)}
        print(f"measuring {trace.name} ...", file=sys.stderr)
        only = set(args.commands.split(",")) if args.commands else None
        row["measures"] = bench_taxbreak(trace, args.repeat, work, only)
        for key, python in (("hta", hta_python), ("traceinsight", args.ti_python)):
            if python and n <= args.hta_max_events:
                row["measures"][key] = bench_hta(trace, args.repeat, python)
                if "analyze_cold" not in row["measures"]:  # --commands left it out: nothing to compare with
                    continue
                row[f"{key}_over_analyze"] = ratio(row["measures"][key], row["measures"]["analyze_cold"])
                row[f"{key}_over_analyze_worst"] = worst_ratio(row["measures"][key], row["measures"]["analyze_cold"])
        results.append(row)
        print(render([row], host), file=sys.stderr)
    report = {"machine": host, "hta_python": hta_python, "results": results}
    if args.cprofile:
        n = SIZES.get(args.cprofile.lower()) or int(args.cprofile)
        report["cprofile"] = cprofile(build_trace(work, n, not args.no_gzip), work)
        print(report["cprofile"], file=sys.stderr)
    if args.stages:
        n = SIZES.get(args.stages.lower()) or int(args.stages)
        trace = build_trace(work, n, not args.no_gzip)
        report["stages"] = subprocess.run([sys.executable, "-c", STAGES_CODE, str(trace)],
                                          capture_output=True, text=True).stdout
        print(report["stages"], file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    print(render(results, host))
    return 0


if __name__ == "__main__":
    sys.exit(main())
