"""``taxbreak analyze DIR`` for a folder of traces (one per rank or run).

``cli/analyze.py`` adds :func:`folder_options` to its command and calls
:func:`dispatch_folder` first: a folder that :func:`taxbreak.scale.is_trace_folder`
accepts goes to :func:`run_folder`; ``-o OUT`` writes ``OUT/summary.json``, or with
``--partitioned`` the hive-partitioned dataset.
stdout is data (the table or JSON), stderr is people (traces done of all while they run,
skipped files, diagnostics, the closing summary line).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import click

from ..report.console_text import markup_text
from .status import working
from ..trace.text import json_for_terminal, safe_text
from ..trace.words import plural
from ..scale.discover import _is_trace_name, discover, is_run_dir, is_trace_folder
from ..trace.errors import TaxbreakError, UsageError

_COLUMNS = (("kernels", "kernels", "{:,}"), ("device_active_us", "device µs", "{:,.1f}"),
            ("orchestration_us", "orchestration µs", "{:,.1f}"), ("hdbi", "HDBI", "{:.3f}"))


def folder_options(fn):
    """``--no-cache`` plus the options of folder mode (ignored for a single trace)."""
    fn = click.option("--combine-runs", is_flag=True,
                      help="Add the traces of different runs (or of a run whose traces disagree) into one "
                           "summary; by default each run is reported apart.")(fn)
    fn = click.option("--no-cache", is_flag=True,
                      help="Parse again: neither read nor write the parse cache.")(fn)
    fn = click.option("--run-id", help="Run key of the partitioned dataset (default: the folder name).")(fn)
    fn = click.option("--partitioned", is_flag=True,
                      help="With -o OUT and a folder: write kernels/steps as a hive-partitioned "
                           "Parquet dataset OUT/<table>/run=<id>/rank=<r>/phase=<p>/.")(fn)
    fn = click.option("--on-error", type=click.Choice(["fail", "skip"]), default="fail", show_default=True,
                      help="A bad trace among many: fail (exit 1 naming it) or skip (report and go on).")(fn)
    fn = click.option("--scheduler-file", type=click.Path(dir_okay=False, path_type=str),
                      help="--engine dask: the scheduler file of a running Dask cluster.")(fn)
    fn = click.option("--scheduler", metavar="ADDRESS",
                      help="--engine dask: a running scheduler (default $DASK_SCHEDULER_ADDRESS, "
                           "else a LocalCluster sized to this machine).")(fn)
    fn = click.option("--engine", type=click.Choice(["local", "dask"]), default="local", show_default=True,
                      help="Where the traces of a folder are analyzed: a process pool here, or Dask "
                           "(pip install 'taxbreak[dask]'). With -o, dask writes the partitioned dataset.")(fn)
    fn = click.option("--workers", type=click.IntRange(min=1),
                      help="Parallel processes for a folder (default: by CPUs and available memory).")(fn)
    return fn


# A rank not read from the trace's metadata says where it came from.
_ORDER_NOTE = {"file_order": " (file order)", "session_order": " (session order)"}


def _json_scalar(value):
    """NumPy scalars as Python numbers; anything else unserializable (pd.NA) as null."""
    return value.item() if hasattr(value, "item") else None


def _fmt(value, pattern: str) -> str:
    return "not measured" if value is None else pattern.format(value)


def _table(result):
    from rich.table import Table  # on use: a single trace's analyze needs no rich

    table = Table(title="per rank", title_justify="left")
    for header in ("run", "rank", "trace", *(h for _, h, _ in _COLUMNS)):
        table.add_column(header, justify="left" if header == "trace" else "right")
    for row in result.per_rank().to_dict("records"):
        rank = f"{row['rank']}" + _ORDER_NOTE.get(row["rank_source"], "")
        table.add_row(markup_text(row["run"]), rank, markup_text(Path(row["path"]).name),
                      *(_fmt(row.get(k), p) for k, _, p in _COLUMNS))
    if result.combined is not None:
        _combined_rows(table, "all", plural(result.combined['traces'], 'trace'), result.combined, phases=True)
        return table
    for run, combined in result.runs.items():  # runs reported apart: each run of several ranks added up
        if combined is not None and combined["traces"] > 1:
            _combined_rows(table, markup_text(run), plural(combined['traces'], 'trace'), combined, phases=False)
    return table


def _combined_rows(table, label: str, traces: str, combined: dict, phases: bool) -> None:
    table.add_row(label, "", traces, *(_fmt(combined["all"].get(k), p) for k, _, p in _COLUMNS), style="bold")
    for phase, metrics in (combined["phases"].items() if phases else ()):
        table.add_row(label, phase, "", *(_fmt(metrics.get(k), p) for k, _, p in _COLUMNS))


def _report_stderr(result, err, quiet: bool = False) -> None:
    for f in result.failed:
        err.print(safe_text(f"skipped {f.path}: error[{f.error['code']}] {f.error['message']}"), markup=False,
                  highlight=False)
    for code, d in result.diagnostics.as_dict().items():
        err.print(safe_text(f"{d['severity']}[{code}] ×{d['count']}: {d['example']}"), markup=False, highlight=False)
    if quiet:
        return
    ok = len(result.files) - len(result.failed)
    skipped = f" · {len(result.failed)} skipped" if result.failed else ""
    # entries with a trace name that were never opened (FIFOs, devices, dangling links, loops):
    # the headline counts them, so "Analyzed 4 of 4" cannot hide a trace that was passed over
    passed = result.diagnostics.count("scale.entry_skipped")
    passed_over = f" · {plural(passed, 'entry', 'entries')} passed over unopened" if passed else ""
    err.print(f"Analyzed {ok} of {plural(len(result.files), 'trace')} in {result.seconds:.1f} s "
              f"with {plural(result.workers, 'worker')}{skipped}{passed_over}",
              highlight=False)


def _is_url(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def _is_many(traces: tuple[str, ...], engine: str) -> bool:
    """Folder mode: several inputs, a URL, the dask engine, or a folder of traces."""
    if len(traces) > 1 or engine == "dask" or any(_is_url(t) for t in traces):
        return True
    return is_trace_folder(traces[0])


def collect_inputs(traces: tuple[str, ...]) -> tuple[list[str], dict[str, list[str]]]:
    """Every trace named by ``traces`` (folders searched, URLs listed) and the entries skipped, by reason."""
    found: list[str] = []
    skipped: dict[str, list[str]] = {}
    for t in traces:
        if _is_url(t):
            found += _remote_traces(t)
        elif Path(t).is_dir() and not is_run_dir(t):
            d = discover(t)
            found += [str(p) for p in d.traces]
            for reason, paths in d.skipped.items():
                skipped.setdefault(reason, []).extend(paths)
        else:
            found.append(t)
    return found, skipped


def _remote_traces(url: str) -> list[str]:
    from ..scale.fsio import url_to_fs

    fs, path = url_to_fs(url)
    if not fs.isdir(path):
        return [url]
    protocol = url.split("://", 1)[0]
    names = sorted(p for p in fs.find(path) if _is_trace_name(p.rsplit("/", 1)[-1]))
    return [f"{protocol}://{p}" for p in names]


def dispatch_folder(traces: tuple[str, ...] | str, scale_opts: dict, *, out_dir: str | None, as_json: bool,
                    floor_us: float | None, step_pattern: str | None, tokens: int | None,
                    quiet: bool = False) -> bool:
    """Apply ``--no-cache``; run folder mode for many traces (``_is_many``).

    Returns:
        True when the traces were handled (the caller is done), False for a single trace or run directory.
    """
    traces = (traces,) if isinstance(traces, str) else tuple(traces)
    if scale_opts.get("no_cache"):
        # The whole process (and the workers it spawns, which inherit the environment) skips the cache.
        os.environ["TAXBREAK_NO_CACHE"] = "1"
    engine = scale_opts.get("engine") or "local"
    if not _is_many(traces, engine):
        return False
    if tokens is not None:
        raise UsageError("usage.invalid", "--tokens applies to one trace, not to a folder of traces")
    run_folder(traces, output=out_dir, as_json=as_json,
               partitioned=scale_opts.get("partitioned", False) or (engine == "dask" and bool(out_dir)),
               run_id=scale_opts.get("run_id"), workers=scale_opts.get("workers"),
               on_error=scale_opts.get("on_error", "fail"), use_cache=not scale_opts.get("no_cache"),
               floor_us=floor_us, step_pattern=step_pattern, engine=engine,
               scheduler=scale_opts.get("scheduler"), scheduler_file=scale_opts.get("scheduler_file"),
               quiet=quiet, combine_runs=scale_opts.get("combine_runs", False))
    return True


def _inputs_label(folder, inputs: list[str]) -> str:
    """What the progress line names: the one folder or URL given, else the count of traces."""
    if isinstance(folder, (str, Path)):
        return str(folder)
    return str(folder[0]) if len(folder) == 1 else plural(len(inputs), "trace")


def run_folder(folder, *, output: str | None = None, as_json: bool = False, partitioned: bool = False,
               run_id: str | None = None, workers: int | None = None, on_error: str = "fail",
               use_cache: bool = True, floor_us: float | None = None, step_pattern: str | None = None,
               engine: str = "local", scheduler: str | None = None, scheduler_file: str | None = None,
               quiet: bool = False, combine_runs: bool = False) -> None:
    """Analyze every trace in ``folder`` (one or several paths/URLs), print per-rank and combined
    results, optionally export. ``quiet`` leaves out the status lines; skipped traces and
    diagnostics still print (they are results, not progress)."""
    if partitioned and not output:
        raise UsageError("usage.invalid", "--partitioned needs -o OUT (the dataset folder)")
    from ..scale.many import analyze_many  # pandas and the decomposer: only when a folder is given

    inputs, skipped = collect_inputs((folder,) if isinstance(folder, (str, Path)) else tuple(folder))
    if not inputs:
        raise UsageError("run.no_traces", "no trace to analyze", path=", ".join(map(str, folder if not isinstance(
            folder, (str, Path)) else [folder])), hint="expected files ending in .json, .json.gz, .sqlite, .nsys-rep")
    with working("analyzing", _inputs_label(folder, inputs), quiet) as progress:
        result = analyze_many(inputs, workers=workers, on_error=on_error, floor_us=floor_us,
                              step_pattern=step_pattern, use_cache=use_cache, run_id=run_id,
                              export_dir=output if partitioned else None, engine=engine,
                              scheduler=scheduler, scheduler_file=scheduler_file, combine_runs=combine_runs,
                              progress=progress)
    for reason, paths in skipped.items():
        result.diagnostics.add("scale.entry_skipped", len(paths), f"{paths[0]}: {reason.replace('_', ' ')}")
    text = json.dumps(result.to_dict(), indent=1, default=_json_scalar) if (as_json or output) else ""
    if output and not partitioned:
        Path(output).mkdir(parents=True, exist_ok=True)
        write_output(Path(output) / "summary.json", text)
    from rich.console import Console  # on use: a single trace's analyze needs no rich

    if as_json:
        click.echo(json_for_terminal(text))
    else:
        from ..report.serving import render_run_skews

        console = Console(width=120)
        console.print(_table(result))
        render_run_skews(result.skew, console)
    _report_stderr(result, Console(stderr=True, width=120), quiet)
    if partitioned and not quiet:
        click.echo(f"wrote {len(result.exported)} Parquet files under {safe_text(output)}", err=True)
    if not any(f.is_ok for f in result.files):
        raise TaxbreakError("scale.nothing_analyzed", f"none of the {len(result.files)} traces could be analyzed",
                            hint="see the skipped lines above")
