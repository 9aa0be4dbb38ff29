"""``taxbreak report``, ``annotate``, ``diff``, ``check``: thin wrappers over taxbreak.report."""
from __future__ import annotations

import json
import sys
import time

import click

from ..trace.fileio import output_target, refuse_shared_outputs, write_output
from ..trace.text import json_for_terminal, safe_text
from .errors import handle_errors
from .status import quiet_option, stage, status_line, working


def analysis_options(fn):
    """The analysis options shared with ``taxbreak analyze``."""
    fn = click.option("--tokens", type=click.IntRange(min=1), default=None,
                      help="Output tokens for the per-token metrics (default: from manifest.json).")(fn)
    fn = click.option("--step-pattern", default=None, metavar="REGEX",
                      help="Regex for step markers (named group `phase` optional).")(fn)
    fn = click.option("--floor-us", type=click.FloatRange(min=0.0, min_open=True), default=None,
                      help="Launch floor T_sys in µs (default: measured/published value).")(fn)
    return fn


def _load(path: str, floor_us, step_pattern, tokens, progress=None):
    from ..report.run import load_run

    return load_run(path, floor_us=floor_us, step_pattern=step_pattern, tokens=tokens, progress=progress)


def _summary_with_progress(path: str, floor_us, step_pattern, tokens, quiet: bool) -> dict:
    """One run's summary, its progress on stderr (off under -q or off a terminal)."""
    with working("analyzing", path, quiet) as progress:
        return _load(path, floor_us, step_pattern, tokens, progress).analysis.summary


def _write(path: str, text: str, inputs=()) -> None:
    """An output file, atomic and never onto ``inputs`` or through a link; ``-`` is stdout."""
    if path == "-":
        click.echo(text, nl=False)
    else:
        write_output(path, text, inputs=inputs)


def _refuse_output(path: str | None, inputs) -> None:
    """Refuse an output onto an input or a link before the analysis runs (it costs seconds)."""
    if path and path != "-":
        output_target(path, inputs=inputs)


@click.command("report")
@click.argument("target", metavar="RUN_DIR|TRACE")
@click.option("-o", "--output", default="report.html", show_default=True, help="HTML file to write.")
@analysis_options
@quiet_option
@handle_errors
def report(target, output, floor_us, step_pattern, tokens, quiet):
    """Write a self-contained HTML report (opens offline)."""
    from ..report.html import render_html

    _refuse_output(output, [target])
    with working("reporting", target, quiet) as progress:
        run = _load(target, floor_us, step_pattern, tokens, progress)
        stage(progress, f"writing {safe_text(output)}")
        _write(output, render_html(run.analysis, manifest=run.manifest, title=str(target)), [target, run.trace_path])
    status_line(f"wrote {safe_text(output)}", quiet)


@click.command("annotate")
@click.argument("trace", metavar="TRACE")
@click.option("-o", "--output", default="annotated.json.gz", show_default=True,
              help="Annotated Kineto trace (.json or .json.gz).")
@click.option("--max-flows", type=click.IntRange(min=0), default=2000, show_default=True, metavar="N",
              help="Flow arrows for the N longest launches and the N longest GPU idle pieces (0: none).")
@analysis_options
@quiet_option
@handle_errors
def annotate(trace, output, max_flows, floor_us, step_pattern, tokens, quiet):
    """Add ΔFT/ΔCT/ΔKT, queue-wait and GPU-idle tracks and flow arrows to a Kineto trace (for Perfetto)."""
    from ..report.annotate import require_kineto, write_annotated
    from ..report.run import find_trace

    require_kineto(find_trace(trace)[0])  # fail before a full analysis
    _refuse_output(output, [trace])
    with working("annotating", trace, quiet) as progress:
        run = _load(trace, floor_us, step_pattern, tokens, progress)
        stage(progress, f"writing {safe_text(output)}")
        stats = write_annotated(run.trace_path, run.analysis, output, max_flows=max_flows, inputs=[trace])
    status_line(f"wrote {safe_text(output)}: {safe_text(stats.summary_line())}", quiet)


@click.command("diff")
@click.argument("base", metavar="BASE")
@click.argument("new", metavar="NEW")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON on stdout.")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True,
              help="How many ops, kernel classes and one-sided kernels to list.")
@analysis_options
@quiet_option
@handle_errors
def diff(base, new, as_json, top, floor_us, step_pattern, tokens, quiet):
    """Compare two runs or traces: components, HDBI, ops and kernels that moved."""
    from ..report.diff import diff_analyses
    from ..report.diff_render import render_diff_text

    with working("analyzing", base, quiet) as progress:
        a = _load(base, floor_us, step_pattern, tokens, progress)
    with working("analyzing", new, quiet) as progress:
        b = _load(new, floor_us, step_pattern, tokens, progress)
    result = diff_analyses(a.analysis, b.analysis, base_label=base, new_label=new, top=top)
    if as_json:
        click.echo(json_for_terminal(json.dumps(result, indent=1, default=_json_default)))
    else:
        click.echo(render_diff_text(result), nl=False)


def _json_default(value):
    """numpy scalars -> Python numbers; anything else as text."""
    return value.item() if hasattr(value, "item") else str(value)


@click.command("check")
@click.argument("targets", metavar="RUN_DIR|TRACE...", nargs=-1, required=True)
@click.option("--budget", "budget_path", required=True, type=click.Path(dir_okay=False),
              help="Budget TOML (docs/ci.md).")
@click.option("--baseline", "baselines", multiple=True, metavar="RUN_DIR|TRACE",
              help="Run to compare [regression] against; repeat it (or name a folder of runs) for the "
                   "median of several, whose spread is the noise band.")
@click.option("--junit", default=None, metavar="FILE", help="Write JUnit XML.")
@click.option("--markdown", default=None, metavar="FILE", help="Write a Markdown summary (CI step summary).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON instead of a table.")
@click.option("--allow-unmeasured", is_flag=True, help="Skip limits on unmeasured metrics instead of failing.")
@analysis_options
@quiet_option
@handle_errors
def check(targets, budget_path, baselines, junit, markdown, as_json, allow_unmeasured, floor_us, step_pattern,
          tokens, quiet):
    """Check overhead budgets; exit 0 when all hold, 1 when any is exceeded, 2 for a bad budget.

    Several runs (or a folder of runs) are checked on their median, with the spread reported."""
    from ..report.budget import load_budget
    from ..report.check_render import headline, render_check_text, render_junit, render_markdown, warning_lines
    from ..report.repeat import evaluate_repeated

    started = time.perf_counter()
    run_paths, base_paths = _expand_runs(targets), _expand_runs(baselines)
    inputs = [*targets, *run_paths, budget_path, *baselines, *base_paths]
    refuse_shared_outputs({"--junit": junit, "--markdown": markdown})
    for path in (junit, markdown):
        _refuse_output(path, inputs)
    budget = load_budget(budget_path)  # before the analysis: a bad budget fails fast
    runs = [_summary_with_progress(t, floor_us, step_pattern, tokens, quiet) for t in run_paths]
    base = [_summary_with_progress(b, floor_us, step_pattern, tokens, quiet) for b in base_paths]
    result = evaluate_repeated(budget, runs, base or None, allow_unmeasured=allow_unmeasured)
    if junit:
        _write(junit, render_junit(result, time_s=time.perf_counter() - started), inputs)
    if markdown:
        _write(markdown, render_markdown(result), inputs)
    if as_json:
        click.echo(json_for_terminal(json.dumps(result.as_dict(), indent=1)))
        for line in warning_lines(result):  # the table prints them itself
            click.echo(line, err=True)
    else:
        click.echo(render_check_text(result), nl=False)
    status_line(headline(result), quiet)
    sys.exit(0 if result.passed else 1)


def _expand_runs(paths: tuple[str, ...]) -> list[str]:
    """Each run directory or trace as given; a folder of them as the runs it holds, in path order."""
    from ..scale.discover import discover, is_trace_folder

    out: list[str] = []
    for p in paths:
        out += [str(t) for t in discover(p).traces] if is_trace_folder(p) else [p]
    return out
