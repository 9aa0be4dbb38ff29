"""``taxbreak ranks``: cross-rank skew of the ranks of one run (docs/serving.md §1)."""
from __future__ import annotations

from pathlib import Path

import click

from .errors import handle_errors
from .status import quiet_option, working


@click.command("ranks")
@click.argument("traces", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--floor-us", type=click.FloatRange(min=0.0, min_open=True), default=None,
              help="T_sys launch floor in µs (default: cached measurement, else published value).")
@click.option("--step-pattern", default=None, help="Regex naming step ranges; named group 'phase' optional.")
@click.option("--json", "as_json", is_flag=True, help="Print the ranks JSON object on stdout.")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="Steps to show.")
@click.option("--run", "run_id", default=None, help="With a fleet dataset: the run to align (default: its only run).")
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="Also write the skew as a self-contained HTML page to this file.")
@quiet_option
@handle_errors
def ranks(traces: tuple[str, ...], floor_us, step_pattern, as_json: bool, top: int, run_id, html_path,
          quiet: bool) -> None:
    """Align the ranks of one run on their collectives: which rank was late, by how much and why.

    TRACES: one trace per rank, a folder of them, one export holding several GPUs, or the root
    of a fleet dataset (taxbreak analyze DIR --partitioned -o OUT)."""
    result = _skew(traces, floor_us, step_pattern, run_id, quiet)
    if html_path:
        _write_html(html_path, result.summary, " ".join(traces))
    if as_json:
        from ..trace.text import json_bytes_for_terminal
        import msgspec

        click.echo(json_bytes_for_terminal(msgspec.json.format(msgspec.json.encode({"ranks": result.summary}))))
        return
    from rich.console import Console

    from ..report.serving import render_ranks

    render_ranks(result.summary, Console(), top)


def _skew(traces: tuple[str, ...], floor_us, step_pattern, run_id, quiet: bool):
    from ..decompose.ranks import rank_skew
    from ..scale.analysis_cache import cached_analyze
    from ..scale.ranks import is_dataset, rank_skew_of_dataset

    if len(traces) == 1 and is_dataset(traces[0]):
        with working("reading", traces[0], quiet):
            return rank_skew_of_dataset(traces[0], run_id)
    paths = _expand(traces)
    analyses = []
    for path in paths:
        with working("analyzing", str(path), quiet):
            analyses.append(cached_analyze(str(path), floor_us=floor_us, step_pattern=step_pattern))
    return rank_skew(analyses, _labels(paths))


def _write_html(path: str, summary: dict, title: str) -> None:
    from ..report.serving_html import render_ranks_html
    from .errors import unwritable

    try:
        Path(path).write_text(render_ranks_html(summary, title), encoding="utf-8")
    except OSError as err:
        raise unwritable(err) from err


def _expand(traces: tuple[str, ...]) -> list[Path]:
    from ..scale.discover import find_traces, is_run_dir

    out = []
    for t in traces:
        p = Path(t)
        out.extend(find_traces(p) if p.is_dir() and not is_run_dir(p) else [p])
    return out


def _labels(paths: list[Path]) -> list[str]:
    """File names, or the parent folder's where the names repeat (rank0/trace.json, rank1/trace.json)."""
    names = [p.name.split(".")[0] for p in paths]
    if len(set(names)) < len(names):
        names = [f"{p.parent.name}/{n}" for p, n in zip(paths, names)]
    return names
