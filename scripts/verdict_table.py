"""The verdict of every trace of the real-trace corpus, as a Markdown table.

For each trace under ``../shared/traces`` (or ``TAXBREAK_SHARED_TRACES``): HDBI, the
four TaxBreak components (ΔFT Python + dispatch, ΔCT, ΔKT = launch floor + exposed
launch latency), the verdict, the largest idle cause and the first advice, as
``taxbreak analyze`` computes them now. docs/report.md holds its output between
``<!-- verdicts -->`` markers; ``--write`` rewrites that block, ``--check`` exits 1
when it differs, with no option the table goes to stdout.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TAXBREAK_SHARED_TRACES", ROOT.parent / "shared" / "traces"))
DOC = ROOT / "docs" / "report.md"
BLOCK = re.compile(r"(<!-- verdicts -->\n)(.*?)(<!-- /verdicts -->)", re.S)
SUFFIXES = (".json", ".json.gz", ".sqlite")


def corpus() -> list[Path]:
    return sorted(p for p in SHARED.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES))


def _us(value) -> str:
    return "n/a" if value is None else f"{value:,.1f}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def row(path: Path) -> list[str]:
    from taxbreak.decompose import analyze
    from taxbreak.report.advice import advise, top_idle_cause

    a = analyze(path)
    s = a.summary["all"]
    kt = None if s.get("launch_floor_us") is None else s["launch_floor_us"] + (s.get("launch_latency_us") or 0.0)
    advice = advise(a.summary)
    hdbi = "n/a" if s.get("hdbi") is None else f"{s['hdbi']:.3f}"
    return [path.name if len(path.name) < 40 else path.parent.name + "/…" + path.name[-18:],
            hdbi, _us(s.get("framework_us")), _us(s.get("library_us")), _us(kt),
            _cell(advice[0].finding), _cell(top_idle_cause(s)), _cell(advice[-1].action)]


HEADER = ["trace", "HDBI", "ΔFT µs", "ΔCT µs", "ΔKT µs", "verdict", "top idle cause", "advice"]


def table() -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for path in corpus():
        lines.append("| " + " | ".join(row(path)) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if not SHARED.is_dir():
        print(f"corpus not found at {SHARED}", file=sys.stderr)
        return 1
    body = table()
    if not (args.write or args.check):
        sys.stdout.write(body)
        return 0
    text = DOC.read_text()
    new = BLOCK.sub(lambda m: m.group(1) + body + m.group(3), text)
    if args.check:
        return 0 if new == text else 1
    DOC.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
