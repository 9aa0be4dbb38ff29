#!/usr/bin/env python
"""Cold and cached ``taxbreak analyze --json TRACE`` in fresh processes, as a user runs it.

    python scripts/bench_cli.py TRACE [--repeat 3]

Each repeat empties a private cache folder, runs the command once (cold: parse, decompose,
write both caches) and once more (cached: the analysis cache's hit), and takes for each run
the time until the first byte of the JSON reaches stdout ("output"), the time until the
process has exited ("exit": the background cache writes are joined before it), the CPU time
of the process (user + system) and its peak RSS (``os.wait4``). Prints the medians and the
1-minute load average. Bytecode caching follows the environment: unset
``PYTHONDONTWRITEBYTECODE`` to measure start-up as an installed package has it.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def run_once(trace: str, cache: str) -> tuple[float, float, float, float]:
    """(output s, exit s, CPU s, peak RSS MiB) of one ``taxbreak analyze --json`` with this cache folder."""
    env = dict(os.environ, TAXBREAK_CACHE_DIR=cache)
    env.pop("TAXBREAK_NO_CACHE", None)
    start = time.perf_counter()
    # run in the cache folder: `python -m` puts the working folder first on sys.path, so a checkout
    # there would win over $PYTHONPATH (the tree to measure)
    proc = subprocess.Popen([sys.executable, "-m", "taxbreak", "analyze", "--json", "--quiet", trace],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cache)
    proc.stdout.read(1)
    output_s = time.perf_counter() - start
    proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"taxbreak analyze exited {proc.returncode}")
    return output_s, time.perf_counter() - start, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    trace = os.path.abspath(args.trace)
    runs: dict[str, list] = {"cold": [], "cached": []}
    for _ in range(args.repeat):
        cache = tempfile.mkdtemp(prefix="taxbreak-bench-cli-")
        try:
            runs["cold"].append(run_once(trace, cache))
            runs["cached"].append(run_once(trace, cache))
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    for kind, rows in runs.items():
        output_s, exit_s, cpu_s, rss = (statistics.median(row[i] for row in rows) for i in range(4))
        print(f"{kind}: output {output_s:.2f} s, exit {exit_s:.2f} s, CPU {cpu_s:.2f} s, peak RSS {rss:.0f} MiB"
              f" (median of {len(rows)})")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
