"""Regenerate the sample outputs and example numbers in README.md and docs/*.md from the current code.

Each sample sits between ``<!-- example:NAME -->`` and ``<!-- /example -->`` (a name is used
once over all these files); this script rewrites what is between them from deterministic inputs.
README.md:

* ``profile-cpu``: ``taxbreak profile`` of the default tiny preset on the CPU.
  Its times depend on the machine and the moment, so the block keeps only what
  does not: steps and ATen ops per phase, ops per token, and the top ops by calls;
* ``notebook``: a Python session on a planted synthetic trace (taxbreak.synth);
* ``analyze-nsys``, ``notebook-no-markers``: real traces of the corpus
  (../shared/traces, or ``TAXBREAK_SHARED_TRACES``); left as they are when it is absent.

docs/*.md: the blocks of ``scripts/doc_examples.py`` (diff excerpts, the annotate line, the worked
examples of docs/method.md), each a fenced excerpt or a paragraph whose numbers it computes.

Usage: ``python3 scripts/readme_examples.py`` rewrites README.md and docs/*.md;
``--check`` exits 1, naming the blocks that differ, without writing.
"""
from __future__ import annotations

import argparse
import io
import os
import re
import sys
import tempfile
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
sys.path.insert(0, str(Path(__file__).resolve().parent))  # doc_examples, beside this script
SHARED_TRACES = Path(os.environ.get("TAXBREAK_SHARED_TRACES", ROOT.parent / "shared" / "traces"))
NSYS_2GPU = SHARED_TRACES / "nsys-ai/tests/fixtures/mfu_2gpu_before.sqlite"
ALEXNET = SHARED_TRACES / "HolisticTraceAnalysis/tests/data/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"
WIDTH = 100
BLOCK = re.compile(r"(<!-- example:(?P<name>[a-z0-9-]+) -->\n)(?P<body>.*?)(<!-- /example -->)", re.S)
PLANTED_FLOOR_US = 4.71  # given, so that no floor cached on the machine changes the numbers


def fenced(text: str, lang: str = "") -> str:
    """``text`` in a fenced code block, trailing spaces of every line removed (rich pads titles)."""
    lines = [line.rstrip() for line in text.strip("\n").splitlines()]
    return f"```{lang}\n" + "\n".join(lines) + "\n```\n"


def terminal_report(analysis) -> str:
    """What ``taxbreak analyze`` prints for ``analysis`` at WIDTH columns, without colour."""
    from rich.console import Console

    from taxbreak.report.terminal import render_analysis

    out = io.StringIO()
    render_analysis(analysis, Console(file=out, width=WIDTH, color_system=None, highlight=False))
    return out.getvalue()


def sections(text: str, titles: tuple[str, ...], all_titles: tuple[str, ...]) -> str:
    """The report sections that start with ``titles``, in order, each up to the next section, "..." between."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(all_titles)]
    picked = []
    for title in titles:
        begin = next((i for i in starts if lines[i].startswith(title)), None)
        if begin is None:
            raise SystemExit(f"readme_examples: the report has no section {title!r}; update the script")
        # a table split into column groups ("Per phase (1/2)", "(2/2)") is one section
        end = next((i for i in starts if i > begin and not lines[i].startswith(title)), len(lines))
        picked.append("\n".join(lines[begin:end]).rstrip())
    return "\n...\n".join(picked)


REPORT_TITLES = ("Verdict:", "Trace health", "Per phase", "Orchestration components", "Queue wait", "Host thread time", "GPU idle by cause",
                 "Top ", "Diagnostics", "What to do")


def analyze_nsys() -> str:
    from taxbreak.decompose import analyze

    text = terminal_report(analyze(NSYS_2GPU))
    return fenced(sections(text, ("Verdict:", "Trace health", "Per phase", "GPU idle by cause", "What to do"),
                           REPORT_TITLES))


def planted_trace(folder: Path) -> Path:
    """A synthetic Kineto trace with known components: 1 prefill and 2 decode steps of 3 ops."""
    from taxbreak.synth.planted import build, random_spec
    from taxbreak.synth.write_kineto import write_kineto

    planted = build(random_spec(np.random.default_rng(17), steps=3, ops=3))
    return write_kineto(planted.tables, folder / "planted.json.gz")


def session(statements: list[str], namespace: dict) -> str:
    """A Python session: each statement after ``>>>``, then what the REPL would show for it."""
    out = []
    for statement in statements:
        out.append(f">>> {statement}")
        try:
            value = eval(compile(statement, "<readme>", "eval"), namespace)
        except SyntaxError:
            exec(compile(statement, "<readme>", "exec"), namespace)
            continue
        except Exception as err:  # shown as the REPL would: the error's type and message
            out.append(f"{type(err).__module__}.{type(err).__qualname__}: {err}")
            continue
        if value is not None:
            out.append(_shown(value))
    return "\n".join(out)


def _shown(value) -> str:
    import pandas as pd

    if isinstance(value, pd.DataFrame):
        with pd.option_context("display.width", WIDTH, "display.max_columns", 20):
            return value.to_string()
    return repr(value)


@contextmanager
def working_dir(path: Path):
    """Run the block in ``path``: a session names its trace by file name, as a notebook next to it would."""
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def notebook() -> str:
    """The session makes its own trace (taxbreak.synth), so a reader can run it as shown."""
    with tempfile.TemporaryDirectory() as tmp:
        with working_dir(Path(tmp)):
            text = session([
                "import numpy as np, taxbreak",
                "from taxbreak.synth.planted import build, random_spec",
                "from taxbreak.synth.write_kineto import write_kineto",
                'path = write_kineto(build(random_spec(np.random.default_rng(17), steps=3, ops=3)).tables, "planted.json.gz")',
                f'a = taxbreak.analyze(path, floor_us={PLANTED_FLOOR_US})',
                "a",
                "a.phase_names",
                "d = a.phase(\"decode\")",
                "d.hdbi, d.ft_us, d.ct_us, d.kt_us, d.orchestration_us",
                "d.idle_by_cause_us[\"launch_latency\"], d.idle_by_cause_us[\"launch_floor\"]",
                'a.summary["phases"]["decode"]["hdbi"] == d.hdbi',
                'a.phases[["phase", "steps", "kernels", "hdbi", "orchestration_us", "tokens"]]',
                'a.kernels[["name", "op_name", "ft_ns", "ct_ns", "t_floor_ns", "queue_wait_ns", "launch_latency_ns"]].head(4)',
                'a.steps[["step", "phase", "kernels", "hdbi", "tokens"]]',
                'idle = a.idle_by_cause',
                'idle[(idle.scope == "phase") & idle.device.isna() & (idle.idle_us > 0)]',
                'a.devices[a.devices.scope == "all"]',
            ], {})
    return fenced(text, "python")


def notebook_no_markers() -> str:
    with working_dir(ALEXNET.parent):
        text = session([
            "import taxbreak",
            f'a = taxbreak.analyze("{ALEXNET.name}")',
            'list(a.summary["phases"])',
            'a.phase("unknown").hdbi',
            'a.phase("decode")',
        ], {})
    return fenced(text, "python")


def profile_cpu() -> str:
    """The deterministic part of ``taxbreak profile`` on the CPU: counts, not times."""
    from taxbreak.capture.runner import ProfileConfig, profile

    with tempfile.TemporaryDirectory() as tmp, redirect_stdout(io.StringIO()):
        result = profile(ProfileConfig(device="cpu", command_line=["taxbreak", "profile"]), out_dir=Path(tmp) / "run")
        layout = sorted(p.name + ("/" if p.is_dir() else "") for p in (Path(tmp) / "run").iterdir())
        analysis = result.analysis
    return fenced(_count_table(analysis) + "\n\n" + _top_calls(analysis) + "\n\nrun directory: " + "  ".join(layout))


def _count_table(analysis) -> str:
    rows = [("phase", "steps", "ATen ops", "ATen ops/token")]
    for name in analysis.phase_names:
        values = analysis.phase(name)
        scope = analysis.summary["all"] if name == "all" else analysis.summary["phases"][name]
        per_token = scope.get("aten_ops_per_token")
        rows.append((name, f"{values.steps:,}", f"{values.aten_ops:,}",
                     "not measured" if per_token is None else f"{per_token:,.1f}"))
    return _aligned(rows)


def _top_calls(analysis, top: int = 8) -> str:
    ops = analysis.ops.sort_values(["root_calls", "op_name"], ascending=[False, True]).head(top)
    rows = [("ATen op (outermost calls)", "calls")] + [(r.op_name, f"{r.root_calls:,}") for r in ops.itertuples()]
    return _aligned(rows)


def _aligned(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
                     for r in rows)


def _doc_examples() -> dict[str, tuple[bool, Callable[[], str]]]:
    from doc_examples import DOC_EXAMPLES

    return DOC_EXAMPLES


# name -> (needs the corpus, generator)
EXAMPLES: dict[str, tuple[bool, Callable[[], str]]] = {
    "profile-cpu": (False, profile_cpu),
    "analyze-nsys": (True, analyze_nsys),
    "notebook": (False, notebook),
    "notebook-no-markers": (True, notebook_no_markers),
    **_doc_examples(),
}


def files() -> list[Path]:
    """Every file whose blocks this script writes: README.md, then docs/*.md."""
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def all_blocks() -> dict[str, tuple[Path, str]]:
    """Every block of every file by name, with its file; a name used twice is an error."""
    found: dict[str, tuple[Path, str]] = {}
    for path in files():
        for name, body in blocks(path.read_text(encoding="utf-8")).items():
            if name in found:
                raise SystemExit(f"readme_examples: block {name!r} is in {found[name][0].name} and {path.name}")
            found[name] = (path, body)
    return found


def blocks(text: str) -> dict[str, str]:
    """The body of every example block of ``text`` by name."""
    return {m["name"]: m["body"] for m in BLOCK.finditer(text)}


def generate(names: list[str] | None = None) -> dict[str, str]:
    """The generated body of each example (all, or ``names``) whose inputs are present."""
    corpus = SHARED_TRACES.is_dir()
    return {name: make() for name, (needs_corpus, make) in EXAMPLES.items()
            if (names is None or name in names) and (corpus or not needs_corpus)}


def rewrite(text: str, bodies: dict[str, str]) -> str:
    """``text`` with each block named in ``bodies`` replaced; unknown block names are an error."""
    unknown = set(blocks(text)) - set(EXAMPLES)
    if unknown:
        raise SystemExit(f"readme_examples: blocks no generator makes: {sorted(unknown)}")
    return BLOCK.sub(lambda m: m.group(1) + bodies.get(m["name"], m["body"]) + m.group(4), text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a file differs; write nothing")
    parser.add_argument("names", nargs="*", help="only these blocks (default: all)")
    args = parser.parse_args(argv)
    all_blocks()  # a name used twice stops here
    bodies = generate(args.names or None)
    stale = []
    for path in files():
        text = path.read_text(encoding="utf-8")
        new = rewrite(text, bodies)
        stale += [(path, n) for n, body in blocks(new).items() if blocks(text).get(n) != body]
        if new != text and not args.check:
            path.write_text(new, encoding="utf-8")
    if args.check:
        for path, name in stale:
            sys.stderr.write(f"{path.relative_to(ROOT)} block {name!r} is stale: run python3 scripts/readme_examples.py\n")
        return 1 if stale else 0
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
