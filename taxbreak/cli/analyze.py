"""``taxbreak analyze``: the TaxBreak decomposition of one trace or run directory."""
from __future__ import annotations

import click
from rich.console import Console

from ..trace.text import json_for_terminal
from .errors import handle_errors
from .many import dispatch_folder, folder_options
from .status import working


@click.command("analyze")
@click.argument("traces", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--floor-us", type=click.FloatRange(min=0.0, min_open=True), default=None,
              help="T_sys launch floor in µs (default: cached measurement, else published value).")
@click.option("--step-pattern", default=None, help="Regex naming step ranges; named group 'phase' optional.")
@click.option("--tokens", type=click.IntRange(min=1), default=None, help="Output tokens in the trace.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary JSON on stdout.")
@click.option("-o", "--output", "out_dir", type=click.Path(file_okay=False, path_type=str), default=None,
              help="Write the tables (Parquet) and summary.json to this directory.")
@click.option("--top", type=click.IntRange(min=0), default=10, show_default=True, help="Top ops to show.")
@click.option("--allow-truncated", is_flag=True,
              help="Keep the complete events of a truncated trace (adds a trace.truncated diagnostic; "
                   "not cached; give --tokens for per-token figures).")
@folder_options
@handle_errors
def analyze(traces: tuple[str, ...], floor_us, step_pattern, tokens, as_json: bool, out_dir, top: int, allow_truncated: bool,
            **scale_opts) -> None:
    """Split host time into ΔFT / ΔCT / ΔKT and compute HDBI per phase for TRACE (file or RUN_DIR).

    TRACE may also be a folder of traces (one per rank or run, run folders searched), several
    traces or folders, or fsspec URLs: they are analyzed in parallel (--engine local|dask) and
    shown per rank and combined (docs/scale.md)."""
    trace = traces[0]
    if dispatch_folder(traces, scale_opts, out_dir=out_dir, as_json=as_json, floor_us=floor_us,
                       step_pattern=step_pattern, tokens=tokens):
        return
    from ..scale.analysis_cache import cached_analyze
    from ..report.terminal import render_analysis

    with working("analyzing", trace):
        if allow_truncated:
            result = _analyze_truncated(trace, floor_us=floor_us, step_pattern=step_pattern, tokens=tokens)
        else:
            result = cached_analyze(trace, floor_us=floor_us, step_pattern=step_pattern, tokens=tokens)
    if out_dir:
        result.to_parquet(out_dir)
    if as_json:
        click.echo(json_for_terminal(result.to_json()))
        return
    render_analysis(result, Console(), top=top)


def _analyze_truncated(trace: str, **options):
    """The decomposition of what a truncated trace still holds.

    The reader's ``json.truncated`` hint points here: the complete events are
    kept and the loss is counted (``trace.truncated``), never hidden. The
    tables are handed over directly, so the analysis cache (keyed on intact
    files) is bypassed and a run manifest's token count is not read.
    """
    from ..decompose import analyze as decompose
    from ..readers import load_trace

    return decompose(load_trace(trace, allow_truncated=True), **options)
