"""``taxbreak info`` (what a trace holds) and ``taxbreak convert`` (its tables as Parquet)."""
from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from ..trace.words import NOT_MEASURED
from ..report.console_text import markup_text as _name
from ..trace.text import json_for_terminal, safe_text
from .errors import handle_errors
from .status import quiet_option, stage, status_line, working

_TRUNCATED_HELP = "Keep the complete events of a truncated trace (adds a trace.truncated diagnostic)."


@click.command("info")
@click.argument("trace", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object with stable keys on stdout.")
@click.option("--allow-truncated", is_flag=True, help=_TRUNCATED_HELP)
@quiet_option
@handle_errors
def info(trace: str, as_json: bool, allow_truncated: bool, quiet: bool) -> None:
    """Devices, time span, rows per table and per kind, and diagnostics of TRACE (file or RUN_DIR)."""
    from ..readers import load_trace
    from ..readers.summary import summarize_tables

    with working("reading", trace, quiet) as progress:
        stage(progress, "reading trace")
        summary = summarize_tables(load_trace(trace, allow_truncated=allow_truncated, progress=progress))
    if as_json:
        click.echo(json_for_terminal(json.dumps(summary, indent=1, sort_keys=True)))
        return
    render_info(summary, Console(highlight=False))


def render_info(summary: dict, console: Console) -> None:
    """The rich rendering of :func:`taxbreak.readers.summary.summarize_tables`."""
    console.print(f"[bold]{_name(summary['path'])}[/bold]  {_name(summary['format'])} "
                  f"(schema {_name(summary['format_version'] or NOT_MEASURED)})", soft_wrap=True)
    devices = ", ".join(f"{_name(d['id'])}: {_name(d['name'] or 'name not recorded')}" for d in summary["devices"]) \
        or "unknown (no device properties)"
    console.print(f"devices: {devices}")
    span = summary["span"]
    span_text = f"{span['dur_ns'] / 1e6:,.3f} ms" if span else "no timed events"
    rank = NOT_MEASURED if summary["rank"] is None else _name(summary["rank"])
    console.print(f"time span: {span_text}   time base: {_name(summary['time_base'])}   rank: {rank}")
    console.print(_tables_table(summary))
    console.print(_accounting_line(summary))
    if summary["diagnostics"]:
        console.print(_diagnostics_table(summary["diagnostics"]))


def _tables_table(summary: dict) -> Table:
    table = Table(title="tables", title_justify="left")
    table.add_column("table")
    table.add_column("rows", justify="right")
    table.add_column("by kind")
    for name, rows in summary["tables"].items():
        kinds = summary["kinds"].get(name, {})
        table.add_row(name, f"{rows:,}", ", ".join(f"{_name(k)} {v:,}" for k, v in kinds.items()))
    return table


def _accounting_line(summary: dict) -> str:
    counts = summary["event_counts"]
    return (f"input events: {summary['input_events']:,} = tables {sum(summary['tables'].values()):,}"
            f" + metadata {counts.get('metadata', 0):,} + dropped {counts.get('dropped', 0):,}")


def _diagnostics_table(diagnostics: dict) -> Table:
    table = Table(title="diagnostics", title_justify="left")
    table.add_column("code")
    table.add_column("severity")
    table.add_column("count", justify="right")
    table.add_column("example", overflow="fold")
    for code, diag in diagnostics.items():
        table.add_row(_name(code), diag["severity"], f"{diag['count']:,}", _name(diag["example"]))
    return table


@click.command("convert")
@click.argument("trace", type=click.Path(path_type=str))
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False, path_type=str),
              help="Directory for one Parquet file per table plus trace_meta.json.")
@click.option("--allow-truncated", is_flag=True, help=_TRUNCATED_HELP)
@quiet_option
@handle_errors
def convert(trace: str, out_dir: str, allow_truncated: bool, quiet: bool) -> None:
    """Write the canonical tables of TRACE as Parquet (pandas, DuckDB, Spark read them)."""
    from ..readers import load_trace

    with working("reading", trace, quiet) as progress:
        stage(progress, "reading trace")
        tables = load_trace(trace, allow_truncated=allow_truncated, progress=progress)
    written = tables.to_parquet(Path(out_dir))
    for path in written:
        click.echo(safe_text(path))
    rows = sum(tables.counts().values())
    status_line(f"wrote {len(written)} files, {rows:,} rows to {safe_text(out_dir)}", quiet)
