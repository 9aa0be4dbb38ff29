"""Structure-aware fuzzing of the Kineto JSON and Nsight SQLite readers.

    python scripts/fuzz.py --seconds 600 --seed 7 --out fuzz-failures/

Each case (a mutated trace) is read and analyzed in a forked child under a
timeout and an address-space cap; a crash (signal), hang (timeout), MemoryError,
traceback (an exception other than taxbreak's typed errors) or broken event
accounting is a failure. Unique failures (by class, exception and innermost
taxbreak frame) are written to --out as the case's bytes plus a JSON record.
Exits 1 when any failure was found. The mutators are in tests/fuzz/mutators.py;
docs/reliability.md, "Fuzzing", has the runs made so far.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fuzz"))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # no BLAS threads in the parent that forks
os.environ.setdefault("TAXBREAK_PARSE_WORKERS", "1")


def main(argv: list[str] | None = None) -> int:
    from driver import choose, fuzz
    from mutators import MUTATORS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="stop after this long (default 60)")
    parser.add_argument("--cases", type=int, default=None, help="stop after this many cases")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="folder for unique failing cases")
    parser.add_argument("--only", default=None, help="comma-separated mutator classes (default: all)")
    parser.add_argument("--skip-pending", action="store_true", help="leave out classes fixed on other branches")
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per case before it counts as a hang")
    parser.add_argument("--memory-mb", type=int, default=2048, help="address space a case may add (MiB)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--list", action="store_true", help="list the mutator classes and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(m.name for m in MUTATORS))
        return 0
    names = args.only.split(",") if args.only else None
    report = fuzz(choose(names, args.skip_pending), seed=args.seed, seconds=args.seconds, max_cases=args.cases,
                  out_dir=args.out, timeout_s=args.timeout, memory_bytes=args.memory_mb * 1024 * 1024)
    if args.json:
        print(json.dumps(report.as_dict(), indent=1))
    else:
        _print(report)
    return 1 if report.unique else 0


def _print(report) -> None:
    d = report.as_dict()
    print(f"{d['cases']} cases in {d['seconds']} s ({d['cases_per_s']} cases/s), seed {d['seed']}: "
          f"{d['failures']} failures, {d['unique_failures']} unique")
    for name, counts in d["by_mutator"].items():
        print(f"  {name:24s} " + "  ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    for signature, u in d["unique"].items():
        print(f"  FAIL {signature} ×{u['count']} (case {u['case']}): {u['detail']}")


if __name__ == "__main__":
    sys.exit(main())
