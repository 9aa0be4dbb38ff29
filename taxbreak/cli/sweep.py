"""``taxbreak sweep`` (profile a shape grid) and ``taxbreak whatif`` (projections)."""
from __future__ import annotations

import json
import math

import click

from ..trace.errors import UsageError
from .errors import handle_errors
from .status import quiet_option, status_line, working


def _int_list(text: str, flag: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UsageError("usage.invalid", f"{flag} takes comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise UsageError("usage.invalid", f"{flag} needs integers >= 1, got {text!r}")
    return values


def _float_list(text: str | None, flag: str) -> list[float]:
    if not text:
        return []
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UsageError("usage.invalid", f"{flag} takes comma-separated numbers, got {text!r}") from None
    if any(not 0.0 <= v <= 1.0 for v in values):
        raise UsageError("usage.invalid", f"{flag} values must lie in [0, 1], got {text!r}")
    return values


@click.command()
@click.option("--model", "-m", required=True, help="Model preset (e.g. llama-3.2-1b, olmoe-1b-7b-tiny).")
@click.option("--batch-sizes", "--batch-size", "-b", "batch_sizes", default="1,2,4,8,16", show_default=True,
              help="Comma-separated batch sizes.")
@click.option("--seq-lens", "--seq-len", "-s", "seq_lens", default="512,1024,2048", show_default=True,
              help="Comma-separated prompt lengths.")
@click.option("--new-tokens", "-t", default=10, show_default=True, type=click.IntRange(min=1),
              help="Tokens per run: 1 prefill + decode steps.")
@click.option("--tiny/--full-size", default=None, help="CPU-size variant of the preset (default: tiny on CPU).")
@click.option("--device", default=None, help="cpu or cuda (default: cuda when present).")
@click.option("--dtype", default=None, help="float32, bfloat16, float16 (default: bf16 on CUDA, fp32 on CPU).")
@click.option("--warmup", default=2, show_default=True, type=click.IntRange(min=0), help="Unrecorded runs per point.")
@click.option("--runs", default=3, show_default=True, type=click.IntRange(min=1), help="Recorded runs per point.")
@click.option("--mixed-shares", default=None, help="Also profile mixed steps at these decode-token shares (0.1,0.2,0.4,0.8).")
@click.option("--decode-context", default=64, show_default=True, type=int, help="Cached tokens per decode request in mixed steps.")
@click.option("--hdbi-threshold", default=0.5, show_default=True, type=float, help="HDBI taken as device-bound.")
@click.option("--json", "as_json", is_flag=True, help="Print the sweep index (with the transition point) as JSON.")
@click.option("--output", "-o", "sweep_dir", required=True, type=click.Path(file_okay=False), help="Sweep directory.")
@quiet_option
@handle_errors
def sweep(model, batch_sizes, seq_lens, new_tokens, tiny, device, dtype, warmup, runs, mixed_shares,
          decode_context, hdbi_threshold, as_json, sweep_dir, quiet):
    """Profile every (batch size, sequence length) point into SWEEP_DIR/b<B>-s<S>/ and find the transition point.

    Resumable: a point whose run directory is complete is not profiled again.
    """
    from ..whatif.render import render_sweep
    from ..whatif.sweep import SweepConfig, run_sweep
    from ..whatif.sweep_report import write_sweep_outputs

    config = SweepConfig(model=model, batch_sizes=_int_list(batch_sizes, "--batch-sizes"),
                         seq_lens=_int_list(seq_lens, "--seq-lens"), new_tokens=new_tokens, tiny=tiny,
                         device=device, dtype=dtype, warmup=warmup, runs=runs,
                         mixed_shares=_float_list(mixed_shares, "--mixed-shares"), mixed_decode_context=decode_context)
    if quiet:
        result = run_sweep(config, sweep_dir)
    else:
        result = _with_progress(lambda progress: run_sweep(config, sweep_dir, progress=progress))
    outputs = write_sweep_outputs(sweep_dir, hdbi_threshold)
    status_line(f"{len(result.points)} points: {result.profiled} profiled, "
                f"{sum(p.status == 'reused' for p in result.points)} reused, {len(result.failed)} failed -> {sweep_dir}",
                quiet)
    if as_json:
        click.echo(json.dumps({**outputs["transition"], "points": [p.point.name for p in result.points]}, indent=1))
    else:
        click.echo(render_sweep(outputs["table"], outputs["transition"], outputs["notes"]))
    if result.failed:
        for failed in result.failed:
            click.echo(f"error: {failed.point.name}: {failed.error}", err=True)
        raise SystemExit(1)


def _with_progress(work):
    """Run ``work(progress)`` under one rich progress bar for the whole grid (on stderr)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(stderr=True)
    with Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
                  TimeElapsedColumn(), console=console, transient=not console.is_terminal,
                  auto_refresh=False) as bar:  # no refresh thread inside profiled steps
        task = bar.add_task("", total=None)

        def progress(done: int, total: int, name: str, status: str) -> None:
            bar.update(task, completed=done, total=total, description=f"{name} {status}" if name else "",
                       refresh=True)

        return work(progress)


@click.command()
@click.argument("path", metavar="RUN_DIR|SWEEP_DIR|TRACE", type=click.Path(exists=True))
@click.option("--cpu-speedup", default=1.2, show_default=True, type=float, help="Single-thread host speed ratio s.")
@click.option("--workload-prompt", default=512.0, show_default=True, type=float, help="Mean prompt length μ_L (tokens).")
@click.option("--workload-output", default=256.0, show_default=True, type=float, help="Mean output length μ_O (tokens).")
@click.option("--concurrency", default="32,512,2048", show_default=True, help="Concurrencies N to advise at.")
@click.option("--calibration", default=None, help="Batching calibration: a JSON file or h200-qwen3-8b / rtx-pro-6000-qwen3-8b.")
@click.option("--alpha-mb", default=None, type=float, help="α_MB in seconds (default α_p).")
@click.option("--kv-capacity-tokens", default=None, type=float, help="KV capacity C for the memory-safe batch size.")
@click.option("--oom-prob", default=0.01, show_default=True, type=float, help="Allowed OOM probability ε.")
@click.option("--graph-launch-us", default=None, type=float, help="Cost of one CUDA graph launch (default: T_sys).")
@click.option("--measure-graphs", is_flag=True, help="On a GPU, time the decode step replayed from a CUDA graph.")
@click.option("--json", "as_json", is_flag=True, help="Print the projections as JSON.")
@quiet_option
@handle_errors
def whatif(path, cpu_speedup, workload_prompt, workload_output, concurrency, calibration, alpha_mb,
           kv_capacity_tokens, oom_prob, graph_launch_us, measure_graphs, as_json, quiet):
    """Project CUDA graphs, a faster host CPU and the batching policy for RUN_DIR, SWEEP_DIR or a TRACE.

    A trace (or a run directory without summary.json) is analysed first, as `taxbreak analyze` does."""
    from ..whatif.api import WhatIfOptions, what_if
    from ..whatif.batching import Workload
    from ..whatif.calibration import load_calibration
    from ..whatif.render import render_whatif

    _check_positive(cpu_speedup=cpu_speedup, workload_prompt=workload_prompt, workload_output=workload_output)
    if not 0.0 < oom_prob < 1.0:
        raise UsageError("usage.invalid", f"--oom-prob must lie in (0, 1), got {oom_prob}")
    options = WhatIfOptions(cpu_speedup=cpu_speedup, workload=Workload(workload_prompt, workload_output),
                            concurrencies=_int_list(concurrency, "--concurrency"),
                            calibration=load_calibration(calibration) if calibration else None,
                            graph_launch_us=graph_launch_us, measure_graphs=measure_graphs,
                            kv_capacity_tokens=kv_capacity_tokens, oom_prob=oom_prob, alpha_mb_s=alpha_mb)
    with working("projecting", path, quiet) as progress:
        result = what_if(path, options, progress=progress)
    click.echo(json.dumps(result, indent=1, default=str) if as_json else render_whatif(result))


def _check_positive(**values: float) -> None:
    for name, value in values.items():
        if not (math.isfinite(value) and value > 0):
            raise UsageError("usage.invalid", f"--{name.replace('_', '-')} must be > 0, got {value}")
