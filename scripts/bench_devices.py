"""Peak memory and time of ``taxbreak analyze`` as the number of devices grows (docs/performance.md).

One host thread launches one kernel onto each of D devices in turn, so every
device's idle gap covers what the thread did for all the others: the case where
exact idle pieces grew as devices x events (4,096 devices: 4.9 GB). Each run is
a fresh ``taxbreak analyze TRACE --format json -o DIR`` child; its own peak RSS
comes from ``wait4``. Memory that stays linear shows as a constant MB per
1,000 devices between sizes.

    PYTHONPATH=$PWD python3 scripts/bench_devices.py            # 256, 1024, 4096 devices
    PYTHONPATH=$PWD python3 scripts/bench_devices.py 256 16384
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchutil import machine_line, run_child  # noqa: E402


def write_many_devices(path: Path, devices: int) -> int:
    """One ``aten::mm`` op, its launch call and its kernel per device, 4 µs apart; returns the events."""
    events = []
    for d in range(devices):
        t = 4.0 * d
        ids = {"External id": d + 1}
        events += [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": t, "dur": 3.0, "args": ids},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 1,
             "dur": 1.0, "args": {"correlation": d + 1, **ids}},
            {"ph": "X", "cat": "kernel", "name": "k", "pid": d, "tid": 7, "ts": t + 2.5, "dur": 2.0,
             "args": {"device": d, "stream": 7, "correlation": d + 1, **ids}},
        ]
    with gzip.open(path, "wt") as out:
        json.dump({"schemaVersion": 1, "traceEvents": events}, out)
    return len(events)


def measure(devices: int, folder: Path) -> dict:
    trace = folder / f"devices_{devices}.json.gz"
    n_events = write_many_devices(trace, devices)
    out_dir = folder / f"out_{devices}"
    env = {**os.environ, "TAXBREAK_NO_CACHE": "1"}
    run = run_child([sys.executable, "-m", "taxbreak", "analyze", str(trace), "--format", "json",
                     "-o", str(out_dir)], env=env)
    if run["rc"] != 0:
        raise SystemExit(f"analyze failed for {devices} devices: {run['stderr'].decode()[-400:]}")
    import pyarrow.parquet as pq

    return {"devices": devices, "events": n_events, "trace_kb": trace.stat().st_size / 1024,
            "idle_rows": pq.read_metadata(out_dir / "idle.parquet").num_rows,
            "wall_s": run["wall_s"], "peak_mb": run["usage"].ru_maxrss / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("devices", nargs="*", type=int, default=[256, 1024, 4096])
    args = parser.parse_args()
    print(machine_line())
    print(f"{'devices':>8} {'events':>8} {'trace KB':>9} {'idle rows':>10} {'wall s':>7} {'peak MB':>8} "
          f"{'MB per 1k devices more':>23}")
    previous = None
    with tempfile.TemporaryDirectory() as tmp:
        for devices in sorted(args.devices):
            row = measure(devices, Path(tmp))
            slope = "" if previous is None else \
                f"{(row['peak_mb'] - previous['peak_mb']) / (devices - previous['devices']) * 1000:.1f}"
            print(f"{devices:>8,} {row['events']:>8,} {row['trace_kb']:>9.0f} {row['idle_rows']:>10,} "
                  f"{row['wall_s']:>7.2f} {row['peak_mb']:>8.0f} {slope:>23}")
            previous = row


if __name__ == "__main__":
    main()
