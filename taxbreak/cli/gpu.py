"""``taxbreak floor`` and ``taxbreak replay``: the GPU stage (needs a CUDA device)."""
from __future__ import annotations

import json
import math

import click

from ..trace.words import NOT_MEASURED
from .errors import handle_errors_json

PUBLISHED_FLOOR_US = {"H100": 4.71, "H200": 4.50}  # TaxBreak, null-kernel mean


def _clean(value):
    """JSON-safe: numpy scalars become Python ones, NaN/inf/NA become null
    (an unmeasured value is never shown as 0)."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item"):  # numpy scalar
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if type(value).__name__ == "NAType":  # pandas.NA
        return None
    return value


def _fmt(value, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return NOT_MEASURED
    return f"{value:,.{digits}f}" if isinstance(value, float) else str(value)


@click.command("floor")
@click.option("--warmup", type=click.IntRange(min=0), default=50, show_default=True,
              help="Null-kernel launches whose samples are discarded.")
@click.option("--runs", type=click.IntRange(min=1), default=150, show_default=True,
              help="Launches whose samples make the floor, per GPU.")
@click.option("--keep-trace", type=click.Path(file_okay=False), default=None,
              help="Keep the floor traces in this folder.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handle_errors_json
def floor(warmup, runs, keep_trace, as_json):
    """Measure the null-kernel launch floor T_sys and cache it per GPU and driver."""
    from ..capture.floor import measure_floor
    from ..trace.paths import floor_cache_path

    results = measure_floor(warmup=warmup, runs=runs, keep_trace=keep_trace)
    rows = [dict(r.as_dict(), cache_path=str(floor_cache_path(r.gpu_name, r.driver_version))) for r in results]
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    for row in rows:
        published = next((v for k, v in PUBLISHED_FLOOR_US.items() if k in row["gpu_name"].upper()), None)
        ref = f" (published {published:.2f} µs)" if published else ""
        click.echo(f"{row['gpu_name']} (driver {row['driver_version']}): T_sys {row['floor_us']:.3f} µs{ref}")
        click.echo(f"  p50 {row['p50_us']:.3f}  p95 {row['p95_us']:.3f}  min {row['min_us']:.3f}  "
                   f"max {row['max_us']:.3f}  std {row['std_us']:.3f} µs over {row['samples']} launches")
        click.echo(f"  cached at {row['cache_path']}")


@click.command("replay")
@click.argument("run_dir", metavar="RUN_DIR|TRACE")
@click.option("--warmup", type=click.IntRange(min=0), default=20, show_default=True,
              help="Unprofiled calls per op before the measured ones.")
@click.option("--runs", type=click.IntRange(min=1), default=50, show_default=True,
              help="Measured calls per op.")
@click.option("--floor-us", type=click.FloatRange(min=0.0, min_open=True), default=None,
              help="Launch floor T_sys in µs (default: measured/published value).")
@click.option("--keep-trace", type=click.Path(file_okay=False), default=None,
              help="Keep the replay trace in this folder.")
@click.option("--top", type=click.IntRange(min=1), default=20, show_default=True,
              help="Kernels shown in the table (by frequency).")
@click.option("--json", "as_json", is_flag=True, help="Print summary, kernels and skipped ops as JSON.")
@handle_errors_json
def replay(run_dir, warmup, runs, floor_us, keep_trace, top, as_json):
    """Replay each unique kernel's ATen op in isolation; in-trace vs isolated."""
    from ..capture.replay import replay as run_replay

    result = run_replay(run_dir, warmup=warmup, runs=runs, floor_us=floor_us, keep_trace=keep_trace)
    if as_json:
        payload = {"summary": result.summary, "kernels": result.kernels.drop(
            columns=["input_dims", "input_types", "input_strides", "concrete_inputs"], errors="ignore"
        ).to_dict(orient="records"), "skipped": result.skipped.to_dict(orient="records")}
        click.echo(json.dumps(_clean(payload), indent=1, default=str))
        return
    _render_replay(result, top)


def _render_replay(result, top: int) -> None:
    from rich.console import Console
    from rich.table import Table

    from ..report.console_text import markup_text

    console = Console()
    s = result.summary
    table = Table(title=f"In-trace vs isolated (T_sys {_fmt(s['floor_us'], 3)} µs, {s['floor_source']})")
    for col in ("kernel", "op", "freq", "tier", "dispatch trace", "dispatch iso", "launch trace", "launch iso"):
        table.add_column(col, justify="left" if col in ("kernel", "op") else "right")
    for row in result.kernels.head(top).itertuples(index=False):
        table.add_row(markup_text(str(row.kernel_name)[:48]), markup_text(row.op_name), str(row.frequency),
                      _fmt(row.match_tier if row.replayed else None, 0),
                      _fmt(row.dispatch_trace_us), _fmt(row.dispatch_replay_us),
                      _fmt(row.launch_trace_us), _fmt(row.launch_replay_us))
    console.print(table)
    with_py = "T_Py added from the trace" if s.get("includes_t_py") else "no T_Py in the trace"
    totals = Table(title=f"Totals (µs, frequency-weighted; {with_py})")
    totals.add_column("")
    for col in ("in-trace", "isolated"):
        totals.add_column(col, justify="right")
    for key in ("dispatch_base_us", "ft_dispatch_us", "ct_us", "floor_total_us", "kt_framework_us",
                "orchestration_dispatch_us", "hdbi_dispatch", "orchestration_us", "hdbi"):
        totals.add_row(key, _fmt(s["in_trace"][key], 3), _fmt(s["isolated"][key], 3))
    console.print(totals)
    console.print(f"replayed {s['kernels_replayed']}/{s['kernels_total']} unique kernels "
                  f"({s['launches_replayed']}/{s['launches_total']} launches); "
                  f"tiers {s['match_tiers']}; ambiguous ranges {s['ambiguous_ranges']}")
    for row in result.skipped.itertuples(index=False):
        console.print(f"  skipped {markup_text(row.op_name)}: {markup_text(row.reason)} ({row.kernels} kernels, "
                      f"{row.frequency} launches)")
