#!/usr/bin/env python
"""Cold ``taxbreak analyze`` of generated Nsight SQLite exports against nsys-ai building its cache.

For each size (kernel + CUDA API rows; default 1m,3m,10m) this writes an export with
``taxbreak.synth.big_nsys.write_big_nsys`` (reused when there), then measures, each in a fresh
process, side by side: ``taxbreak analyze EXPORT`` with an empty cache, and ``nsys-ai warm`` on
a copy of the export (it writes its Parquet/DuckDB cache beside the file, removed before each
run). Wall time around the child; peak RSS is the child's ``ru_maxrss`` (``os.wait4``).

nsys-ai 0.3.0 in its own venv; its cache needs DuckDB's ``sqlite_scanner`` extension, which it
downloads on first use, so offline it is installed from PyPI (DuckDB and the extension must be
the same version)::

    python -m venv /work/venv-nsysai
    /work/venv-nsysai/bin/pip install nsys-ai==0.3.0 duckdb==1.5.5 duckdb-extension-sqlite-scanner==1.5.5
    mkdir -p ~/.duckdb/extensions/v1.5.5/linux_amd64
    cp /work/venv-nsysai/lib/python3.11/site-packages/duckdb_extension_sqlite_scanner/extensions/v1.5.5/*.duckdb_extension \\
       ~/.duckdb/extensions/v1.5.5/linux_amd64/
    python scripts/bench_nsys.py --sizes 1m,3m --repeat 3 --nsys-ai /work/venv-nsysai/bin/nsys-ai
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchutil import run_child

SIZES = {"100k": 100_000, "1m": 1_000_000, "3m": 3_000_000, "10m": 10_000_000}
BUILD_CODE = "import sys; from taxbreak.synth.big_nsys import write_big_nsys; print(write_big_nsys(sys.argv[1], int(sys.argv[2])))"


def measure(cmd: list[str], env: dict | None = None) -> dict:
    child = run_child(cmd, env, stdout=subprocess.DEVNULL)
    if child["rc"] != 0:
        print(f"  ! exit {child['rc']}: {' '.join(cmd)}\n{child['stderr'].decode(errors='replace')[-1500:]}",
              file=sys.stderr)
    return {"wall_s": round(child["wall_s"], 3), "peak_rss_mb": round(child["usage"].ru_maxrss / 1024), "rc": child["rc"]}


def build(work: Path, n_rows: int) -> Path:
    path = work / f"nsys_{n_rows}.sqlite"
    if not path.exists():
        t0 = time.perf_counter()
        tmp = path.with_name(".building-" + path.name)
        subprocess.run([sys.executable, "-c", BUILD_CODE, str(tmp), str(n_rows)], check=True)
        tmp.rename(path)
        print(f"wrote {path.name} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return path


def taxbreak_cold(export: Path, work: Path) -> dict:
    cache = Path(tempfile.mkdtemp(prefix="tb-cache-", dir=work))
    try:
        return measure([sys.executable, "-m", "taxbreak", "analyze", str(export)],
                       dict(os.environ, TAXBREAK_CACHE_DIR=str(cache)))
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def nsys_ai_warm(export: Path, work: Path, nsys_ai: str) -> dict:
    """``nsys-ai warm`` on a private copy (hard link when possible): a cold build each time."""
    folder = Path(tempfile.mkdtemp(prefix="nsysai-", dir=work))
    copy = folder / export.name
    try:
        os.link(export, copy)
    except OSError:
        shutil.copy(export, copy)
    try:
        return measure([nsys_ai, "warm", str(copy)])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def summary(runs: list[dict]) -> dict:
    ok = [r for r in runs if r["rc"] == 0]
    if not ok:
        return {"wall_s": None, "runs": runs}
    walls = [r["wall_s"] for r in ok]
    return {"wall_s": statistics.median(walls), "worst_s": max(walls), "best_s": min(walls),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in ok), "runs": walls}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1m,3m,10m")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work-dir", default=str(Path(tempfile.gettempdir()) / "taxbreak-bench-nsys"))
    parser.add_argument("--nsys-ai", help="the nsys-ai command (its venv's bin/nsys-ai)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    results = []
    for size in args.sizes.split(","):
        n = SIZES.get(size.strip().lower()) or int(size)
        export = build(work, n)
        row = {"rows": n, "file_mb": round(export.stat().st_size / 1e6, 1), "load_1m": os.getloadavg()[0]}
        runs: dict[str, list] = {"taxbreak": [], "nsys_ai": []}
        for _ in range(args.repeat):  # alternating, so both see the same phases of a shared machine
            runs["taxbreak"].append(taxbreak_cold(export, work))
            if args.nsys_ai:
                runs["nsys_ai"].append(nsys_ai_warm(export, work, args.nsys_ai))
        row.update({name: summary(r) for name, r in runs.items() if r})
        if row.get("nsys_ai", {}).get("wall_s") and row["taxbreak"]["wall_s"]:
            row["nsys_ai_over_taxbreak"] = round(row["nsys_ai"]["wall_s"] / row["taxbreak"]["wall_s"], 2)
        print(json.dumps(row), file=sys.stderr)
        results.append(row)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    print(render(results))
    return 0


def render(results: list[dict]) -> str:
    lines = ["| rows | file MB | tool | wall s (median) | worst s | peak RSS MB | M rows/s |",
             "|---:|---:|---|---:|---:|---:|---:|"]
    for r in results:
        for tool in ("taxbreak", "nsys_ai"):
            m = r.get(tool)
            if not m or not m.get("wall_s"):
                continue
            lines.append(f"| {r['rows']:,} | {r['file_mb']} | {tool} | {m['wall_s']:.2f} | {m['worst_s']:.2f} | "
                         f"{m['peak_rss_mb']:,} | {r['rows'] / m['wall_s'] / 1e6:.2f} |")
        if r.get("nsys_ai_over_taxbreak"):
            lines.append(f"| | | **nsys-ai / taxbreak** | **{r['nsys_ai_over_taxbreak']:.2f}x** | | | |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
