#!/usr/bin/env python
"""Save or compare the analysis outputs of a set of traces: the speed work must not change them.

``save`` analyses every trace (no cache) and writes, per trace, the frames of ``Analysis``
(``kernels``, ``steps``, ``phases``, ``ops``, ``host_partition``, ``idle``) as Parquet, the
dtypes of each, and the summary JSON. ``compare`` analyses them again with the current code and
checks that every frame (values, dtypes, column order, index) and the summary JSON text are equal
to the saved ones; it exits 1 on any difference and names it.

Usage::

    python scripts/bench_outputs.py save REF_DIR [TRACE ...]      # before a change
    python scripts/bench_outputs.py compare REF_DIR               # after it (same traces)

Without traces, ``save`` takes every real trace under /work/shared/traces (Kineto JSON and
Nsight SQLite) or ``$TAXBREAK_TRACES``.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

FRAMES = ("kernels", "steps", "phases", "ops", "host_partition", "idle")
DEFAULT_ROOT = os.environ.get("TAXBREAK_TRACES", "/work/shared/traces")


def default_traces(root: str = DEFAULT_ROOT) -> list[Path]:
    found = [p for p in Path(root).rglob("*") if p.is_file()
             and (p.name.endswith((".json", ".json.gz", ".sqlite")))]
    return sorted(found)


def slot(trace: Path) -> str:
    """A folder name per trace: the file name plus a hash of the full path (names repeat)."""
    digest = hashlib.sha1(str(trace.resolve()).encode()).hexdigest()[:8]
    return f"{trace.name}-{digest}"


def analyse(trace: Path):
    """The analysis of ``trace`` or the error code it raises (an error is an output too)."""
    from taxbreak.decompose import analyze
    from taxbreak.trace.errors import TaxbreakError

    try:
        return analyze(str(trace)), None
    except TaxbreakError as err:
        return None, getattr(err, "code", type(err).__name__)


def save_one(trace: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    result, error = analyse(trace)
    record = {"trace": str(trace), "error": error, "dtypes": {}}
    if result is not None:
        for name in FRAMES:
            frame = getattr(result, name)
            frame.to_pickle(out / f"{name}.pkl")
            record["dtypes"][name] = {str(c): str(t) for c, t in frame.dtypes.items()}
        (out / "summary.json").write_text(result.to_json())
    (out / "record.json").write_text(json.dumps(record, indent=1))


def compare_one(out: Path) -> list[str]:
    """Differences between the saved outputs in ``out`` and a fresh analysis of the same trace."""
    import pandas as pd

    record = json.loads((out / "record.json").read_text())
    trace = Path(record["trace"])
    result, error = analyse(trace)
    if error != record["error"]:
        return [f"{trace}: error {error!r}, saved {record['error']!r}"]
    if result is None:
        return []
    problems = []
    for name in FRAMES:
        saved = pd.read_pickle(out / f"{name}.pkl")
        try:
            pd.testing.assert_frame_equal(getattr(result, name), saved, check_exact=True)
        except AssertionError as diff:
            problems.append(f"{trace}: frame {name}: {str(diff).splitlines()[0:3]}")
    if result.to_json() != (out / "summary.json").read_text():
        problems.append(f"{trace}: summary JSON differs")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=("save", "compare"))
    parser.add_argument("ref_dir")
    parser.add_argument("traces", nargs="*")
    args = parser.parse_args(argv)
    os.environ["TAXBREAK_NO_CACHE"] = "1"
    ref = Path(args.ref_dir)
    if args.mode == "save":
        traces = [Path(t) for t in args.traces] or default_traces()
        for trace in traces:
            save_one(trace, ref / slot(trace))
            print(f"saved {trace}", file=sys.stderr)
        return 0
    problems = []
    for out in sorted(p for p in ref.iterdir() if (p / "record.json").exists()):
        found = compare_one(out)
        problems += found
        print(f"{'DIFF' if found else 'same'} {out.name}", file=sys.stderr)
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
