"""The verdict and the components of every trace of the real-trace corpus, as Markdown tables.

For each trace under ``../shared/traces`` (or ``TAXBREAK_SHARED_TRACES``):

* docs/report.md, between ``<!-- verdicts -->`` markers: HDBI, ΔFT, ΔCT, ΔKT (launch floor +
  exposed launch latency), the verdict, the largest idle cause and the advice on it, with why;
* docs/method.md, between ``<!-- components -->`` markers: HDBI or its covered part, ΔFT (T_py),
  ΔCT (by name), N·T_sys, launch latency and dependency waits;
* docs/method.md, between ``<!-- disagreements -->`` markers: how many traces' HDBI and idle share
  disagree (docs/method.md §3.3) and, per such trace, the explanation the verdict gives.

``--write`` rewrites both blocks, ``--check`` exits 1 when either differs; with no option the
tables go to stdout.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's package, whatever an editable install points at
SHARED = Path(os.environ.get("TAXBREAK_SHARED_TRACES", ROOT.parent / "shared" / "traces"))
DOCS = {"verdicts": ROOT / "docs" / "report.md", "components": ROOT / "docs" / "method.md",
        "disagreements": ROOT / "docs" / "method.md"}
SUFFIXES = (".json", ".json.gz", ".sqlite")


def corpus() -> list[Path]:
    return sorted(p for p in SHARED.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES))


def _us(value) -> str:
    return "n/a" if value is None else f"{value:,.1f}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _name(path: Path) -> str:
    return path.name if len(path.name) < 40 else path.parent.name + "/…" + path.name[-18:]


def _hdbi(s: dict) -> str:
    if s.get("hdbi") is not None:
        return f"{s['hdbi']:.3f}"
    if s.get("hdbi_covered") is not None:
        return f"n/a ({s['hdbi_covered']:.3f} over {100 * s['hdbi_coverage']:.0f}%)"
    return "n/a"


def verdict_row(path: Path, summary: dict) -> list[str]:
    from taxbreak.report.advice import advise, top_idle_cause

    s = summary["all"]
    kt = None if s.get("launch_floor_us") is None else s["launch_floor_us"] + (s.get("launch_latency_us") or 0.0)
    advice = advise(summary)
    exposed = next((a for a in advice if a.cause), None)
    said = f"on {exposed.cause}: {exposed.action}" if exposed else f"(no idle cause ranked) {advice[-1].action}"
    return [_name(path), _hdbi(s), _us(s.get("framework_us")), _us(s.get("library_us")), _us(kt),
            _cell(advice[0].finding), _cell(top_idle_cause(s)), _cell(said)]


def components_row(path: Path, summary: dict) -> list[str]:
    s = summary["all"]
    return [_name(path), f"{s['kernels']:,}", _hdbi(s), f"{_us(s.get('framework_us'))} ({_us(s.get('framework_python_us'))})",
            f"{_us(s.get('library_us'))} ({_us(s.get('library_by_name_us'))})",
            f"{_us(s.get('launch_floor_us'))} ({s.get('floor_source')})", _us(s.get("launch_latency_us")),
            _us(s.get("dependency_wait_us"))]


def disagreement_row(path: Path, summary: dict) -> list[str] | None:
    """trace, HDBI, idle share and the explanation, where HDBI and the idle share disagree."""
    from taxbreak.report.advice import hdbi_idle_disagreement

    s = summary["all"]
    why = hdbi_idle_disagreement(s)
    if why is None:
        return None
    idle = 100.0 * sum(d["idle_us"] for d in s["devices"].values()) / (s["wall_us"] * len(s["devices"]))
    return [_name(path), _hdbi(s), f"{idle:.0f} %", _cell(why)]


def _disagreements(rows: list[list[str]], traces: int) -> str:
    head = f"On the corpus, {len(rows)} of {traces} traces disagree (measured with this tree):\n\n"
    return head + _table(HEADERS["disagreements"], rows)


def _table(header: list[str], body: list[list[str]]) -> str:
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                     + ["| " + " | ".join(r) + " |" for r in body]) + "\n"


HEADERS = {
    "disagreements": ["trace", "HDBI", "idle", "the verdict's explanation"],
    "verdicts": ["trace", "HDBI", "ΔFT µs", "ΔCT µs", "ΔKT µs", "verdict", "largest idle cause", "advice"],
    "components": ["trace", "kernels", "HDBI", "ΔFT µs (T_py)", "ΔCT µs (by name)", "N·T_sys µs (source)",
                   "launch latency µs", "dependency wait µs"],
}


def tables() -> dict[str, str]:
    from taxbreak.decompose import analyze

    rows = {"verdicts": [], "components": [], "disagreements": []}
    paths = corpus()
    for path in paths:
        summary = analyze(path).summary
        rows["verdicts"].append(verdict_row(path, summary))
        rows["components"].append(components_row(path, summary))
        rows["disagreements"].append(disagreement_row(path, summary))
    disagree = [r for r in rows.pop("disagreements") if r is not None]
    out = {name: _table(HEADERS[name], body) for name, body in rows.items()}
    return out | {"disagreements": _disagreements(disagree, len(paths))}


def rewritten(name: str, body: str) -> tuple[str, str]:
    text = DOCS[name].read_text()
    block = re.compile(rf"(<!-- {name} -->\n)(.*?)(<!-- /{name} -->)", re.S)
    return text, block.sub(lambda m: m.group(1) + body + m.group(3), text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if not SHARED.is_dir():
        print(f"corpus not found at {SHARED}", file=sys.stderr)
        return 1
    bodies = tables()
    if not (args.write or args.check):
        sys.stdout.write("\n".join(bodies.values()))
        return 0
    differ = []
    for name, body in bodies.items():
        old, new = rewritten(name, body)
        if new != old:
            differ.append(name)
            if args.write:
                DOCS[name].write_text(new)
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    sys.exit(main())
