"""``taxbreak profile``: run a model through prefill and decode under the profiler."""
from __future__ import annotations

import json
import os
import sys

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ..trace.errors import UsageError
from ..trace.words import NOT_MEASURED
from ..report.console_text import markup_text
from .errors import handle_errors
from .status import quiet_option

_STAGES = {
    "build": "building model",
    "warmup": "warm-up runs (unrecorded)",
    "baseline": "timing runs without profiler",
    "record": "recorded runs",
    "export": "exporting trace",
    "analyze": "analyzing",
}


@click.command("profile")
@click.option("--model", "-m", default=None, metavar="M",
              help="Preset (llama-3.2-1b, llama-3.2-3b, gpt2, olmoe-1b-7b, qwen1.5-moe-a2.7b, <name>-tiny) "
                   "or hf:PATH. Default llama-3.2-1b (its tiny variant on CPU).")
@click.option("--batch-size", "-b", default=1, show_default=True, type=click.IntRange(min=1))
@click.option("--seq-len", "-s", default=128, show_default=True, type=click.IntRange(min=1), help="Prompt tokens.")
@click.option("--new-tokens", "-t", default=10, show_default=True, type=click.IntRange(min=1),
              help="Output tokens per run: 1 prefill + (T-1) decode steps.")
@click.option("--warmup", default=2, show_default=True, type=click.IntRange(min=0), help="Unrecorded runs first.")
@click.option("--runs", default=3, show_default=True, type=click.IntRange(min=1), help="Recorded runs.")
@click.option("--layers", type=click.IntRange(min=1), default=None, help="Override the layer count.")
@click.option("--hidden", type=click.IntRange(min=1), default=None, help="Override the hidden size.")
@click.option("--experts", type=click.IntRange(min=1), default=None, help="Override the expert count (MoE).")
@click.option("--dtype", type=click.Choice(["float32", "bfloat16", "float16"]), default=None,
              help="Default bfloat16 on CUDA, float32 on CPU.")
@click.option("--device", default=None, help="cpu or cuda[:N]; default cuda when present.")
@click.option("--tiny/--full-size", "tiny", default=None, help="Tiny variant (default on CPU) or full size.")
@click.option("--backend", type=click.Choice(["torch", "nsys"]), default="torch", show_default=True)
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="torch intra-op threads (default 1 on CPU, torch's default on CUDA).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of weights and prompt.")
@click.option("--output", "-o", "out_dir", type=click.Path(file_okay=False), default=None,
              help="Run directory (default ./taxbreak-runs/<UTC time>-<model>/).")
@click.option("--force", is_flag=True, help="Write into an --output directory that already holds files.")
@quiet_option
@click.option("--json", "as_json", is_flag=True, help="Print manifest and summary as JSON on stdout.")
@handle_errors
def profile(out_dir, force, quiet, as_json, **options):
    """Profile prefill and decode of a built-in model; write a run directory and its decomposition."""
    refuse_existing(out_dir, force)
    from ..capture.runner import ProfileConfig
    from ..capture.runner import profile as run_profile

    config = ProfileConfig(**options, command_line=["taxbreak", *sys.argv[1:]])
    err_console = Console(stderr=True)
    with _progress(err_console, quiet or as_json) as on_progress:
        result = run_profile(config, out_dir=out_dir, progress=on_progress)
    if as_json:
        summary = getattr(result.analysis, "summary", None)
        click.echo(json.dumps({"run_dir": str(result.run_dir), "manifest": result.manifest, "summary": summary},
                              indent=2, default=str))
        return
    console = Console()
    console.print(model_line(result.manifest))
    render_result(result, console)
    err_console.print(f"run directory: [bold]{markup_text(result.run_dir)}[/bold]")  # a result, kept under -q


def refuse_existing(out_dir: str | None, force: bool) -> None:
    """``-o DIR`` naming a folder that already holds files is refused unless ``--force``:
    a new run would mix its trace and tables with the old ones. An empty folder is fine."""
    if out_dir is None or force or not os.path.isdir(out_dir):
        return
    try:
        occupied = any(os.scandir(out_dir))
    except OSError:
        return  # unreadable: the write itself will report it as output.unwritable
    if occupied:
        raise UsageError("usage.invalid", "the output directory already holds files", path=out_dir,
                         hint="choose a new -o directory, or add --force to write over this one")


class _progress:
    """A rich progress display fed by ``ProgressEvent``s (nothing when quiet)."""

    def __init__(self, console: Console, quiet: bool) -> None:
        self.quiet = quiet
        # auto_refresh=False: rich's refresh thread would otherwise run (and be
        # traced, and compete for the GIL) inside the profiled steps; the bar is
        # redrawn only between steps, when the runner reports progress.
        self.bar = Progress(TextColumn("{task.description:<32}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=console, transient=False, auto_refresh=False)
        self.tasks: dict[str, int] = {}

    def __enter__(self):
        return None if self.quiet else self.update

    def update(self, event) -> None:
        if not self.tasks:  # started on the first event, so an early error leaves no empty bar
            self.bar.start()
        if event.stage not in self.tasks:
            self.tasks[event.stage] = self.bar.add_task(_STAGES.get(event.stage, event.stage), total=event.total)
        self.bar.update(self.tasks[event.stage], completed=event.done, total=max(event.total, 1), refresh=True)

    def __exit__(self, *exc) -> bool:
        if self.tasks:
            self.bar.stop()
        return False


def model_line(manifest: dict) -> str:
    """What ran: the network's depth, width and parameters, and whether it is a tiny variant.

    ``-m llama-3.2-3b`` on a CPU runs its tiny variant; the line says so, so two presets are
    never mistaken for the published models (or for each other)."""
    spec = manifest.get("model_config") or {}
    name = str(manifest.get("model", "?"))
    size = "tiny, CPU-size variant; --full-size for the published shape" if name.endswith("-tiny") else "full size"
    experts = f", {spec['experts']} experts (top {spec['top_k']})" if spec.get("experts") else ""
    params = manifest.get("parameters")
    params_text = NOT_MEASURED if params is None else f"{params:,}"
    return (f"model: [bold]{markup_text(name)}[/bold] ({size}): {spec.get('layers', '?')} layers, "
            f"hidden {spec.get('hidden', '?')}{experts}, {params_text} parameters, "
            f"{markup_text(manifest.get('device'))} {markup_text(manifest.get('dtype'))}")


def render_result(result, console: Console) -> None:
    """The decomposition report when the analysis exists, else what was captured and why not more."""
    if result.analysis is not None:
        try:
            from ..report.terminal import render_analysis
        except ImportError:
            render_analysis = None
        if render_analysis is not None:
            render_analysis(result.analysis, console)
            _render_overhead(result.manifest, console)
            return
    _render_capture(result.manifest, console)


def _render_capture(manifest: dict, console: Console) -> None:
    table = Table(title=f"taxbreak profile: {markup_text(manifest['model'])}", show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value")
    table.add_row("parameters", f"{manifest['parameters']:,}")
    table.add_row("shape", f"batch {manifest['batch_size']} · prompt {manifest['seq_len']} · "
                           f"{manifest['new_tokens']} output tokens · {manifest['runs']} runs")
    table.add_row("device", f"{manifest['device']} ({manifest['dtype']})")
    floor = manifest["floor"]
    table.add_row("launch floor", _fmt_floor(floor))
    for name, status in manifest.get("outputs", {}).items():
        table.add_row(name, status)
    console.print(table)
    _render_overhead(manifest, console)


def _fmt_floor(floor: dict) -> str:
    if floor.get("floor_us") is None:
        return f"{NOT_MEASURED} ({floor.get('reason', floor.get('source'))})"
    return f"{floor['floor_us']:.2f} µs ({floor['source']})"


def _render_overhead(manifest: dict, console: Console) -> None:
    over = manifest["capture_overhead"]
    if over["overhead_pct"] is None:
        reason = over.get("reason")
        console.print(f"capture overhead: {NOT_MEASURED}" + (f" ({reason})" if reason else ""))
        return
    console.print(f"capture overhead: {over['overhead_pct']:+.0f}% of step time "
                  f"({over['step_ms_without_profiler']:.3f} ms/step without profiler, "
                  f"{over['step_ms_with_profiler']:.3f} ms/step with)")
