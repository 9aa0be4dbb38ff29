"""``taxbreak analyze``: the TaxBreak decomposition of one trace or run directory."""
from __future__ import annotations

import click

from ..report.tables_csv import CSV_TABLES, check_analysis_outputs, table_csv, write_analysis_outputs
from ..trace.errors import UsageError
from ..trace.text import json_bytes_for_terminal
from .errors import handle_errors
from .many import dispatch_folder, folder_options
from .status import quiet_option, working


@click.command("analyze")
@click.argument("traces", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--floor-us", type=click.FloatRange(min=0.0, min_open=True), default=None,
              help="T_sys launch floor in µs (default: cached measurement, else published value).")
@click.option("--step-pattern", default=None, help="Regex naming step ranges; named group 'phase' optional.")
@click.option("--tokens", type=click.IntRange(min=1), default=None, help="Output tokens in the trace.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary JSON on stdout (= --format json).")
@click.option("--format", "out_format", type=click.Choice(["text", "json", "csv"]), default=None,
              help="stdout: the report (text, default), the summary (json) or one table as CSV (csv, see --table).")
@click.option("--table", type=click.Choice(CSV_TABLES), default="phases", show_default=True,
              help="The table --format csv prints: one row per kernel, step or phase.")
@click.option("-o", "--output", "out_dir", type=click.Path(file_okay=False, path_type=str), default=None,
              help="Write the tables (Parquet) and summary.json to this directory; with --format csv "
                   "also kernels.csv, steps.csv and phases.csv.")
@click.option("--top", type=click.IntRange(min=0), default=10, show_default=True, help="Top ops to show.")
@click.option("--allow-truncated", is_flag=True,
              help="Keep the complete events of a truncated trace (adds a trace.truncated diagnostic; "
                   "not cached; give --tokens for per-token figures).")
@quiet_option
@folder_options
@handle_errors
def analyze(traces: tuple[str, ...], floor_us, step_pattern, tokens, as_json: bool, out_format, table: str, out_dir,
            top: int, allow_truncated: bool, quiet: bool, **scale_opts) -> None:
    """Split host time into ΔFT / ΔCT / ΔKT and compute HDBI per phase for TRACE (file or RUN_DIR).

    TRACE may also be a folder of traces (one per rank or run, run folders searched), several
    traces or folders, or fsspec URLs: they are analyzed in parallel (--engine local|dask) and
    shown per rank and combined (docs/scale.md)."""
    trace = traces[0]
    out_format = _output_format(as_json, out_format, traces)
    as_json = out_format == "json"
    if out_format != "csv" and dispatch_folder(traces, scale_opts, out_dir=out_dir, as_json=as_json, floor_us=floor_us,
                       step_pattern=step_pattern, tokens=tokens, quiet=quiet):
        return
    from ..readers.cache import deferred_writes

    if out_dir:
        check_analysis_outputs(out_dir, csv=out_format == "csv")  # before the analysis's seconds
    with deferred_writes():  # the analysis cache is written once the output is out
        result = _analysis(trace, allow_truncated, quiet, floor_us=floor_us, step_pattern=step_pattern, tokens=tokens)
        _write_output(result, out_format, table, out_dir, top)


def _analysis(trace: str, allow_truncated: bool, quiet: bool, **options):
    from ..scale.analysis_cache import cached_analyze

    with working("analyzing", trace, quiet) as progress:
        if allow_truncated:
            return _analyze_truncated(trace, progress=progress, **options)
        return cached_analyze(trace, progress=progress, **options)


def _write_output(result, out_format: str, table: str, out_dir, top: int) -> None:
    """The report, the summary JSON or one CSV table on stdout; the tables under ``out_dir``."""
    if out_dir:
        write_analysis_outputs(result, out_dir, csv=out_format == "csv")
    if out_format == "csv":
        click.echo(table_csv(result, table), nl=False)
        return
    if out_format == "json":
        click.echo(json_bytes_for_terminal(result.to_json_bytes()))  # bytes: written as they are
        return
    from rich.console import Console  # on use: `analyze --help` does not need rich
    from ..report.terminal import render_analysis

    render_analysis(result, Console(), top=top)


def _output_format(as_json: bool, out_format: str | None, traces: tuple[str, ...]) -> str:
    """``--json`` is ``--format json``; the two may not disagree. CSV tables are one trace's."""
    if as_json and out_format not in (None, "json"):
        raise UsageError("usage.invalid", f"--json and --format {out_format} ask for two outputs",
                         hint="give one of them")
    chosen = "json" if as_json else (out_format or "text")
    if chosen == "csv" and len(traces) > 1:
        raise UsageError("usage.invalid", "--format csv prints the tables of one trace",
                         hint="analyze one trace at a time, or use -o DIR for the Parquet tables of many")
    return chosen


def _analyze_truncated(trace: str, **options):
    """The decomposition of what a truncated trace still holds.

    The reader's ``json.truncated`` hint points here: the complete events are
    kept and the loss is counted (``trace.truncated``), never hidden. The
    tables are handed over directly, so the analysis cache (keyed on intact
    files) is bypassed and a run manifest's token count is not read.
    """
    from ..decompose import analyze as decompose
    from ..readers import load_trace
    from .status import stage

    stage(options.get("progress"), "reading trace")
    return decompose(load_trace(trace, allow_truncated=True, progress=options.get("progress")), **options)
