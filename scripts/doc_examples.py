"""Generators of the example numbers in docs/*.md (used by scripts/readme_examples.py).

Each function returns the body of one ``<!-- example:NAME -->`` block: a fenced excerpt of real
output, or a paragraph whose every number comes from the analysis it names. The planted pair is
built by the tests' own writer (tests/report/traces.py); the rest read the real-trace corpus.
"""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED_TRACES = Path(os.environ.get("TAXBREAK_SHARED_TRACES", ROOT.parent / "shared" / "traces"))
HTA = SHARED_TRACES / "HolisticTraceAnalysis/tests/data"
RESNET = HTA / "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
NEGATIVE_QUEUE = HTA / "negative_queue_length_values_check/rank0.json.gz"
ALEXNET = HTA / "critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"
SAXPY = SHARED_TRACES / "pipit/pipit/tests/data/saxpy-mpi-cuda_nsys_perlmutter0.sqlite"
NSYS = SHARED_TRACES / "nsys-ai/tests/fixtures"
DIFF_WIDTH = 100
# diff rows by label; durations carry their unit in the cell (terminal_fit.duration), not the label
PLANTED_DIFF_ROWS = ("framework Python (ΔFT py)", "T_Orchestrate", "HDBI", "kernels / token", "host: ATen ops",
                     "host: Python", "host: untraced", "host: wall")
NSYS_DIFF_ROWS = ("framework Python (ΔFT py)", "framework dispatch (ΔFT disp)", "launch floor (ΔKT = N·T_sys)",
                  "T_Orchestrate", "T_DeviceActive", "HDBI", "kernels")


def _ms(us: float | None) -> str:
    return "n/a" if us is None else f"{us / 1e3:,.1f} ms"


@contextmanager
def _fresh_cache():
    """No floor measured earlier on this machine changes the numbers: an empty cache folder."""
    before = os.environ.get("TAXBREAK_CACHE_DIR")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TAXBREAK_CACHE_DIR"] = tmp
        try:
            yield Path(tmp)
        finally:
            if before is None:
                os.environ.pop("TAXBREAK_CACHE_DIR", None)
            else:
                os.environ["TAXBREAK_CACHE_DIR"] = before


def _analyze(path: Path, **kw):
    from taxbreak.decompose import analyze

    with _fresh_cache():
        return analyze(path, **kw)


def table_excerpt(text: str, scope: str, labels: tuple[str, ...], one_sided: bool = False) -> str:
    """The ``scope`` table of a diff's text cut to the rows named ``labels`` (rulings kept
    between groups), then, with ``one_sided``, the "kernels only in" tables' rows."""
    lines = [line.rstrip() for line in text.splitlines()]
    begin = lines.index(scope)
    end = next(i for i in range(begin, len(lines)) if lines[i].startswith("└"))
    body = [line for line in lines[begin + 1: end] if line.startswith("├")
            or (line.startswith("│") and line.split("│")[1].strip() in labels)]
    while body and body[-1].startswith("├"):
        body.pop()
    kept = [line for i, line in enumerate(body) if not (line.startswith("├") and (i == 0 or body[i - 1].startswith("├")))]
    out = [scope, next(line for line in lines[begin:end] if line.startswith("┃")), *kept]
    if one_sided:
        for i, line in enumerate(lines):
            if line.startswith("kernels only in"):
                out.append(line)
                out += [row for row in lines[i + 1:] if row.startswith("│")][:1]
    return "\n".join(out)


def _diff_text(base: Path, new: Path) -> tuple[dict, str]:
    from taxbreak.report.diff import diff_analyses
    from taxbreak.report.diff_render import render_diff_text

    diff = diff_analyses(_analyze(base, floor_us=4.5), _analyze(new, floor_us=4.5), str(base), str(new))
    return diff, render_diff_text(diff, width=DIFF_WIDTH)


def diff_planted() -> str:
    import sys

    from readme_examples import fenced

    sys.path.insert(0, str(ROOT))
    from tests.report.traces import write_planted

    with tempfile.TemporaryDirectory() as tmp:
        base = write_planted(Path(tmp) / "base.json")
        new = write_planted(Path(tmp) / "new.json", xss=True, extra_python_us=3.0)
        _, text = _diff_text(base, new)
    return fenced(table_excerpt(text, "all", PLANTED_DIFF_ROWS, one_sided=True))


def diff_nsys() -> str:
    """The Nsight A/B pair's table excerpt and the sentence that reads it."""
    from readme_examples import fenced

    diff, text = _diff_text(NSYS / "mfu_2gpu_before.sqlite", NSYS / "mfu_2gpu_after.sqlite")
    return fenced(table_excerpt(text, "all", NSYS_DIFF_ROWS)) + "\n" + _nsys_reading(diff) + "\n"


def _nsys_reading(diff: dict) -> str:
    scope = diff["scopes"]["all"]
    kernels, floor, framework = scope["kernels"], scope["launch_floor_us"], scope["framework_us"]
    ops = sorted(diff["ops"], key=lambda r: -(r["delta"] or 0.0))[:2]
    top_class = max(diff["kernel_classes"], key=lambda r: r["delta"] or 0.0)
    fewer, count = ("fewer" if kernels["delta"] < 0 else "more"), abs(int(round(kernels["delta"])))
    moved = " and ".join(f"`{r['op_name']}` ({r['delta']:+,.0f} µs)" for r in ops)
    one_sided = diff["kernels"]["only_in_base_count"] + diff["kernels"]["only_in_new_count"]
    names = "Both runs use the same kernel names." if not one_sided else \
        f"{one_sided:,} kernel names are found in one run only."
    return (f"The \"after\" run launches {count:,} {fewer} kernels ({kernels['delta_pct']:+.1f} %), "
            f"so its launch floor {'drops' if floor['delta'] < 0 else 'rises'} by {abs(floor['delta']) / 1e3:.2f} ms, "
            f"but its framework time {'rises' if framework['delta'] > 0 else 'falls'} "
            f"({framework['delta']:+,.0f} µs): the ops that moved most are {moved}, "
            f"{top_class['kernel_class']} kernels ({top_class['delta']:+,.0f} µs orchestration). {names}")


def annotate_alexnet() -> str:
    """``taxbreak annotate`` of the AlexNet trace: the line it prints and the sizes in and out."""
    from click.testing import CliRunner

    from readme_examples import fenced, working_dir
    from taxbreak.cli.main import main

    with _fresh_cache(), tempfile.TemporaryDirectory() as tmp, working_dir(Path(tmp)):
        result = CliRunner().invoke(main, ["annotate", str(ALEXNET), "-o", "alexnet.annotated.json.gz"])
        if result.exit_code != 0:
            raise SystemExit(f"readme_examples: annotate failed: {result.output}")
        size_out = Path(tmp, "alexnet.annotated.json.gz").stat().st_size
    floor = _analyze(ALEXNET).summary["all"]
    intro = (f"Real output (HTA AlexNet trace, floor `{floor['floor_source']}` {floor['floor_us']:g} µs; "
             f"{ALEXNET.stat().st_size / 1e3:.1f} KB in, {size_out / 1e3:.1f} KB out):\n\n")
    command = f"$ taxbreak annotate .../alexnet/{ALEXNET.name} -o alexnet.annotated.json.gz"
    return intro + fenced(command + "\n" + result.stderr.strip())


IDLE_WORDS = {"nothing_pending": "nothing pending (the host ran on after the last kernel)",
              "launch_latency": "launch latency", "copy_issued": "before issued copies",
              "untraced": "untraced host time", "host_stall": "host stalls", "python": "Python",
              "dispatch": "dispatch", "dependency_wait": "dependency waits",
              "graph_internal": "inside CUDA graph replays", "launch_floor": "launch floor"}


def _causes(causes: dict, least_us: float = 50.0) -> str:
    """The idle causes of at least ``least_us``, largest first, in ms with their words."""
    ranked = sorted(((v, k) for k, v in causes.items() if v and v >= least_us), reverse=True)
    return ", ".join(f"{_ms(v)} {IDLE_WORDS.get(k, k.replace('_', ' '))}" for v, k in ranked)


def idle_worked_example() -> str:
    """docs/method.md §3.1: the V100 ResNet trace's idle time by cause, and the verdict on it."""
    from taxbreak.report.advice import advise

    a = _analyze(RESNET)
    s, (device, d) = a.summary["all"], next(iter(a.summary["all"]["devices"].items()))
    verdict = advise(a.summary)[0].finding.split(":")[0]
    share = 100 * s["device_idle_us"] / (s["wall_us"] * len(s["devices"]))
    return (f"Worked example (`ns_resolution_trace/rank-0`, V100 ResNet): {_ms(s['wall_us'])} elapsed, device "
            f"{device} busy {_ms(d['busy_us'])} and idle {_ms(d['idle_us'])} — {_causes(d['idle_by_cause_us'])}; "
            f"the launch latency equals the trace's ΔKT launch latency, {_ms(s['launch_latency_us'])}. Before this "
            "account the report drew the summed launch residual (§2.1) beside the device time and warned about the "
            f"launch queue; now it says {verdict} (idle {share:.0f} %, HDBI {s['hdbi']:.3f}) and calls the queueing "
            "healthy.\n")


def launch_residual() -> str:
    """docs/method.md §2.1: the residual of the paper against the split, on the V100 ResNet trace."""
    s = _analyze(RESNET).summary["all"]
    return (f"On the V100 ResNet trace `ns_resolution_trace/rank-0` (device span {_ms(s['span_us'])}) the split "
            f"gives {_ms(s['launch_latency_us'])} of launch latency and {s['queue_wait_sum_us'] / 1e6:,.1f} s of "
            f"queue wait summed over kernels (they overlap), whose union is {_ms(s['queue_wait_union_us'])} of its "
            f"{_ms(s['wall_us'])} elapsed time: the device was fed all along, and the residual was nearly all "
            "queueing.\n")


def idle_split_negative_queue() -> str:
    """docs/method.md §3.1: the idle split of the HTA trace that has issued copies and graphs."""
    s = _analyze(NEGATIVE_QUEUE).summary["all"]
    return (f"On the HTA trace `negative_queue_length_values_check/rank0`, the device was idle "
            f"{_ms(s['device_idle_us'])} beside a ΔKT launch latency of {_ms(s['launch_latency_us'])}; by cause: "
            f"{_causes(s['idle_by_cause_us'], least_us=100.0)}.\n")


def busy_split_saxpy() -> str:
    """docs/method.md §3.1: busy time by kind on the saxpy Nsight export (copies dominate)."""
    s = _analyze(SAXPY).summary["all"]
    return (f"On `saxpy-mpi-cuda_nsys_perlmutter0.sqlite` the device was busy {_ms(s['device_busy_us'])}: "
            f"{_ms(s['device_copy_busy_us'])} of copies against {_ms(s['device_kernel_busy_us'])} of kernels.\n")


def _planted_analysis(folder: Path):
    import sys

    sys.path.insert(0, str(ROOT))
    from tests.report.traces import write_planted

    return _analyze(write_planted(folder / "trace.json.gz", xss=True), floor_us=4.5)


def html_planted() -> str:
    """docs/report.md, "What the screenshots show": the planted run directory's page in numbers."""
    from taxbreak.report.svg import nice_ticks

    with tempfile.TemporaryDirectory() as tmp:
        a = _planted_analysis(Path(tmp))
    s = a.summary["all"]
    parts = " + ".join(f"{s[k]:g}" for k in ("framework_python_us", "framework_dispatch_us", "library_us",
                                             "launch_floor_us") if s.get(k))
    causes = ", ".join(k.replace("_", " ") for k, v in s["idle_by_cause_us"].items() if v)
    step_us = (a.steps["end_ns"].iloc[0] - a.steps["start_ns"].iloc[0]) / 1e3
    tick = nice_ticks(step_us, 8)[1]
    phases = " and ".join(sorted(a.summary["phases"]))
    return (f"* Planted decode trace in a run directory (`tests/report/traces.py`; {s['kernels']} kernels, "
            f"`--floor-us 4.5`): cards HDBI {s['hdbi']:.3f}, T_Orchestrate {s['orchestration_us']:.2f} µs, "
            f"T_DeviceActive {s['device_active_us']:.2f} µs, kernels {s['kernels']}, GPU idle "
            f"{s['device_idle_us']:,.0f} µs, queue wait {s['queue_wait_union_us']:.2f} µs; one phase ({phases}, "
            f"which is all: drawn once) stacks {parts} µs of components plus {s['launch_latency_us']:g} µs of "
            f"exposed launch latency over the device bar of {s['device_active_us']:g} µs; queue wait "
            f"{s['queue_wait_union_us']:.2f} µs; GPU idle {s['device_idle_us']:,.0f} µs by cause ({causes}); one "
            f"bar each for HDBI and T_Orchestrate at step 0; the timeline shows the {step_us:,.0f} µs step with "
            "the host thread's annotation, Python, op and CUDA API rows above one stream with "
            f"{s['kernels']} kernels and its idle spans shaded, ticks every {tick:g} µs; the op table lists "
            "`aten::<img src=x onerror=\"alert(2)\">` as text.\n")


def html_alexnet() -> str:
    """docs/report.md, "What the screenshots show": the AlexNet page in numbers."""
    a = _analyze(ALEXNET)
    s, meta = a.summary["all"], a.tables.meta
    streams = sorted({int(x) for x in a.tables.device_activities.column("stream").to_numpy() if 0 <= x < 2**32 - 1})
    top = max(((v or 0.0, k) for k, v in s["idle_by_cause_us"].items()))
    return (f"* HTA AlexNet benchmark trace ({', '.join(sorted(set(meta.device_names)))}, {s['kernels']} kernels, "
            f"no step markers): the timeline is the whole {s['wall_us'] / 1e6:.1f} s "
            f"trace with streams {' and '.join(map(str, streams))} and a `GPU 0 · no stream` row of syncs; GPU "
            f"idle is {100 * top[0] / s['device_idle_us']:.0f} % `{top[1].replace('_', ' ')}` "
            "(cudaEventQuery polling).\n")


def _duration(us: float) -> str:
    """29.9 s, 825 ms, 1.4 ms, 49 µs: three significant figures at most, as prose reads."""
    if us >= 1e6:
        return f"{us / 1e6:.1f} s"
    if us >= 1e5:
        return f"{us / 1e3:.0f} ms"
    return f"{us / 1e3:.1f} ms" if us >= 1e3 else f"{us:.0f} µs"


def _first_calls(ops: list[dict]) -> str:
    named = [f"`{o['op_name']}` ({_duration(o['first_call_us'])} against a later median of "
             f"{_duration(o['later_median_us'])})" for o in ops]
    return ", ".join(named[:-1]) + f" and {named[-1]}" if len(named) > 1 else named[0]


def warmup_corpus() -> str:
    """docs/method.md §3.2: what the warm-up rule flags on the corpus, AlexNet in detail."""
    from taxbreak.decompose import analyze

    paths = sorted(p for p in SHARED_TRACES.rglob("*") if p.is_file() and p.name.endswith((".json", ".json.gz", ".sqlite")))
    with _fresh_cache():
        warm = {p: analyze(p).summary for p in paths}
    alex = warm[ALEXNET]
    w, s = alex["warmup"], alex["all"]
    text = (f"On `critical_path/alexnet` (A100) {w['calls']} first calls are warm-up: {_first_calls(w['ops'])}. "
            f"Their {w['kernels']} kernels carry {_duration(w['library_us'])} of the {_duration(s['library_us'])} ΔCT "
            f"({100 * w['library_share']:.1f} %), {_duration(w['framework_us'])} of the {_duration(s['framework_us'])} "
            f"ΔFT and {100 * w['orchestration_share']:.1f} % of T_Orchestrate.")
    others = []
    for path, summary in warm.items():
        wu = summary.get("warmup") or {}
        if path != ALEXNET and wu.get("calls"):
            share = wu.get("orchestration_share")
            label = f"{path.parent.name}/{path.name.split('.')[0]}"
            label = label if len(label) <= 40 else label[:39] + "…"
            others.append((share or 0.0, f"`{label}` "
                                         f"({wu['calls']} first call{'s' if wu['calls'] > 1 else ''}, "
                                         + ("T_Orchestrate share not measured)" if share is None else
                                            f"{100 * share:.1f} % of T_Orchestrate)")))
    others.sort(key=lambda o: -o[0])
    listed = "; ".join(text_ for _, text_ in others)
    return text + (f" On the other corpus traces it flags: {listed}.\n" if others else
                   " It flags nothing on the other corpus traces.\n")


def timeline_resnet() -> str:
    """docs/report.md: what the timeline draws of the V100 ResNet step (widened window, thinned host)."""
    from taxbreak.report.timeline import MAX_EVENTS, render_timeline

    a = _analyze(RESNET)
    svg, w = render_timeline(a.tables, a.steps)
    drawn = svg.count('<rect class="ev"')
    return (f"The timeline draws at most {MAX_EVENTS:,} events. {w.note.strip()} (V100 ResNet, "
            f"{w.label}; {drawn:,} events drawn.)\n")


# name -> (needs the corpus, generator)
DOC_EXAMPLES = {
    "timeline-resnet": (True, timeline_resnet),
    "warmup-corpus": (True, warmup_corpus),
    "html-planted": (False, html_planted),
    "html-alexnet": (True, html_alexnet),
    "diff-planted": (False, diff_planted),
    "diff-nsys": (True, diff_nsys),
    "annotate-alexnet": (True, annotate_alexnet),
    "idle-worked-example": (True, idle_worked_example),
    "launch-residual": (True, launch_residual),
    "idle-split-negative-queue": (True, idle_split_negative_queue),
    "busy-split-saxpy": (True, busy_split_saxpy),
}
