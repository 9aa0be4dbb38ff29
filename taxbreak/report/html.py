"""A self-contained HTML report of one analysis (``taxbreak report``).

One file, no network: inline CSS, hand-written SVG charts (:mod:`taxbreak.report.svg`,
:mod:`taxbreak.report.timeline`) and one inline script (``report.js``: hover text,
timeline zoom). The Content-Security-Policy allows that script by its sha256 and
no other, and every trace string is escaped (:mod:`taxbreak.report.markup`), so a
kernel named ``<script>alert(1)</script>`` renders as text and could not run if it
were ever written as markup.
"""
from __future__ import annotations

import base64
import datetime as _dt
import hashlib
from pathlib import Path

import pandas as pd

from .. import __version__
from .diff import kernel_orchestration_ns
from .markup import Markup, join, tag, void
from .metrics import COMPONENTS, PHASES, fmt_value, metric_label, number
from .serving_html import serving_sections
from .svg import BarGroup, Segment, component_chart, idle_chart, queue_chart, step_chart
from .words import NOT_MEASURED

SCRIPT = (Path(__file__).with_name("report.js")).read_text(encoding="utf-8")
SCRIPT_HASH = base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode("ascii")
CSP = f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{SCRIPT_HASH}'"
CSS = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1160px}
h1{font-size:22px;margin:0 0 4px;overflow-wrap:anywhere}dd{overflow-wrap:anywhere}
h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:13px;margin:6px 0}
td,th{padding:3px 8px;border-bottom:1px solid #eee;text-align:right}
td:first-child,th:first-child{text-align:left}
td.name,th.name{max-width:560px;overflow-wrap:anywhere;text-align:left}
.cards{display:flex;gap:12px;flex-wrap:wrap}
.card{border:1px solid #ddd;border-radius:6px;padding:8px 12px;min-width:130px}
.card b{display:block;font-size:20px}.missing{color:#777;font-style:italic}.note{color:#555;font-size:13px}
svg{max-width:100%;height:auto;font:12px system-ui,sans-serif}svg .lbl,svg .legend{font-size:11px}
svg.timeline{cursor:grab;user-select:none}svg.timeline .lbl{font-size:10px}rect.idle{fill-opacity:.12}
svg text.missing{font-style:italic;fill:#666}[data-tip]:hover{stroke:#222;stroke-width:.6}
#tip{position:absolute;z-index:9;pointer-events:none;background:#222;color:#fff;font-size:12px;padding:3px 7px;
border-radius:4px;max-width:560px;overflow-wrap:anywhere;white-space:pre-line}
dl.meta{display:grid;grid-template-columns:max-content auto;gap:2px 14px;font-size:13px}dt{color:#555}
"""


def _summary(analysis) -> dict:
    return getattr(analysis, "summary", None) or {}


def _mval(metrics: dict | None, key: str):
    return None if metrics is None else metrics.get(key)


def _named(value) -> str | None:
    if isinstance(value, dict):
        return value.get("name") or None
    return str(value) if value else None


def _device_names(analysis, manifest: dict | None) -> str:
    m = manifest or {}
    named = _named(m.get("gpu")) or m.get("gpu_name") or (m.get("host") or {}).get("gpu_name")
    if named:
        return str(named)
    tables = getattr(analysis, "tables", None)
    names = tables.meta.device_names if tables is not None else []
    if names:
        return ", ".join(sorted(set(names)))
    has_device = (_summary(analysis).get("all") or {}).get("device_active_us") is not None
    return "unknown (device activity present, name not recorded)" if has_device else "no CUDA device in trace"


def _cpu_name(manifest: dict | None) -> str:
    m = manifest or {}
    named = _named(m.get("cpu")) or m.get("cpu_model") or (m.get("host") or {}).get("cpu_model")
    return str(named) if named else "not recorded"


SHAPE_KEYS = ("batch_size", "seq_len", "new_tokens", "runs", "dtype", "device")


def header(analysis, manifest: dict | None, title: str | None) -> Markup:
    """Model, shape, GPU, CPU and the launch floor with its source."""
    m, s = manifest or {}, _summary(analysis).get("all") or {}
    shape = ", ".join(f"{k} {m[k]}" for k in SHAPE_KEYS if m.get(k) is not None)
    rows = [("model", m.get("model") or "not recorded (no run manifest)"),
            ("shape", shape or "not recorded"), ("GPU", _device_names(analysis, manifest)),
            ("CPU", _cpu_name(manifest)), ("launch floor T_sys", _floor_text(s)),
            ("trace", (_summary(analysis).get("meta") or {}).get("path") or title or "")]
    body = join(join([tag("dt", k), tag("dd", v, style="margin:0")]) for k, v in rows)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return join([tag("h1", "taxbreak report", f" — {title}" if title else ""),
                 tag("p", f"taxbreak {__version__}, generated {stamp}", class_="note"),
                 tag("dl", body, class_="meta")])


def _floor_text(s: dict) -> str:
    floor, source = number(s.get("floor_us")), s.get("floor_source")
    if floor is None:
        return f"{NOT_MEASURED} ({source or 'unknown'}: no device activity in trace)"
    return f"{floor:.2f} µs (source: {source or 'unknown'})"


def cards(s: dict) -> Markup:
    items = [("HDBI", "hdbi", ""), ("T_Orchestrate", "orchestration_us", " µs"),
             ("T_DeviceActive", "device_active_us", " µs"), ("kernels", "kernels", ""),
             ("kernels / token", "kernels_per_token", ""), ("GPU idle (Σ devices)", "device_idle_us", " µs"),
             ("queue wait (union)", "queue_wait_union_us", " µs")]
    out = []
    if s.get("hdbi") is None and s.get("hdbi_covered") is not None:  # the index over the launches it covers
        items.insert(1, (f"HDBI over {100.0 * s['hdbi_coverage']:.0f}% of launch calls", "hdbi_covered", ""))
    if s.get("library_by_name_us"):
        items.insert(2, ("ΔCT estimated from kernel names", "library_by_name_us", " µs"))
    for label, key, unit in items:
        value = s.get(key)
        text = fmt_value(value, key) + (unit if number(value) is not None else "")
        out.append(tag("div", label, tag("b", text, class_=None if number(value) is not None else "missing"),
                       class_="card"))
    return tag("div", *out, class_="cards")


def phase_scopes(summary: dict) -> list[tuple[str, str, dict]]:
    """(key, label, metrics) per scope drawn: each phase, then ``all``. With a single phase
    ``all`` is that phase (nothing lies between steps), so it is shown once, named as both."""
    phases = summary.get("phases") or {}
    order = [p for p in PHASES if p in phases] + sorted(set(phases) - set(PHASES))
    scopes = [(name, _phase_label(name), phases[name]) for name in order]
    if len(scopes) == 1:
        return [(order[0], f"{_phase_label(order[0])} (= all)", summary.get("all") or {})]
    return scopes + [("all", "all", summary.get("all") or {})]


def _phase_label(name: str) -> str:
    return "between steps" if name == "between" else name


def phase_section(summary: dict) -> Markup:
    """Stacked component bars against device-active time, per phase and overall; then queue
    wait and GPU idle by cause, each on its own axis and only where measured."""
    scopes = phase_scopes(summary)
    groups = [_bar_group(label, metrics) for _, label, metrics in scopes]
    chart = component_chart(groups)
    if chart is None:
        note = ("no CUDA device in trace: the TaxBreak components, T_DeviceActive and HDBI are not measured "
                "in any phase (the host partition of the timeline section still is)")
        return join([tag("p", note, class_="missing"), _phase_table(scopes)])
    notes = [tag("p", f"{g.label}: not measured (not drawn): ", ", ".join(missing), class_="missing")
             for g in groups if (missing := [seg.label for seg in g.segments if seg.value is None])]
    queue = queue_chart(groups)
    queue_part = [tag("h3", "Queue wait (device side, not host time)"), queue] if queue is not None else \
        [tag("p", "Queue wait: none in any phase (no launched kernel waited behind earlier work)", class_="note")]
    return join([chart, *notes, *queue_part, idle_section(scopes), stalls_section(summary),
                 _phase_table(scopes)])


def idle_section(scopes: list[tuple[str, str, dict]]) -> Markup:
    """GPU idle by the host layer that caused it, per phase (skipped, with a line, when not measured)."""
    chart = idle_chart([(label, metrics.get("idle_by_cause_us")) for _, label, metrics in scopes])
    if chart is None:
        return tag("p", "GPU idle by cause: not measured in any phase (no device activity)", class_="missing")
    all_metrics = scopes[-1][2]  # the last scope is all (or the single phase that is all)
    return join([tag("h3", "GPU idle by cause"), chart, device_busy_table(all_metrics.get("devices"))])


BUSY_KEYS = ("device_busy_us", "device_kernel_busy_us", "device_copy_busy_us", "device_memset_busy_us")
BUSY_LABELS = ("busy (any work)", "kernels", "copies (memcpy)", "memsets")


def device_busy_table(devices: dict | None) -> Markup:
    """Busy time per device split by kind: unions per kind, which can overlap (not a partition)."""
    if not devices:
        return join([])
    keys = ("busy_us", *BUSY_KEYS[1:])
    head = tag("tr", tag("th", "device"), *[tag("th", label + " µs") for label in BUSY_LABELS], tag("th", "idle µs"))
    rows = [tag("tr", tag("td", name), *[_cell(number(d.get(key)), key) for key in (*keys, "idle_us")])
            for name, d in devices.items()]
    note = tag("p", "Kernels, copies and memsets are each the union of that kind's intervals: they can run at "
                    "the same time, so they need not add up to the busy time.", class_="note")
    return join([tag("h3", "Device busy time by kind (whole trace)"), tag("table", head, *rows), note])


def _bar_group(label: str, metrics: dict) -> BarGroup:
    segments = [Segment(key, name, number(metrics.get(key))) for key, name in COMPONENTS]
    return BarGroup(label, segments, number(metrics.get("device_active_us")), number(metrics.get("hdbi")),
                    number(metrics.get("orchestration_us")), queue_us=number(metrics.get("queue_wait_union_us")))


def _phase_table(scopes: list[tuple[str, str, dict]]) -> Markup:
    # the host rows are measured without a GPU too: on a CPU run they are the comparable numbers
    keys = [k for k, _ in COMPONENTS] + ["orchestration_us", "device_active_us", *BUSY_KEYS, "hdbi", "kernels",
                                         "kernels_per_token", "orchestration_us_per_token", "steps",
                                         "aten_ops", "aten_ops_per_token", "host_thread_us"]
    head = tag("tr", tag("th", "metric"), *[tag("th", label) for _, label, _ in scopes])
    rows = [tag("tr", tag("td", metric_label(key), title=key), *[_cell(_mval(m, key), key) for _, _, m in scopes])
            for key in keys]
    return tag("table", head, *rows)


NAME_CHARS = 140


def _name_cell(name) -> Markup:
    """A trace name, cut to NAME_CHARS characters; the full name is the tooltip."""
    text = str(name)
    short = text if len(text) <= NAME_CHARS else text[: NAME_CHARS - 1] + "…"
    return tag("td", short, class_="name", title=text if short != text else None)


def _cell(value, key: str = "") -> Markup:
    missing = number(value) is None and not isinstance(value, str)
    return tag("td", fmt_value(value, key), class_="missing" if missing else None)


def _by_phase(steps: list[dict], key: str) -> list[tuple[str, list[float | None]]]:
    """One series per phase: the phase's steps keep their value, the others are None."""
    from .svg import PHASE_COLORS

    phases = [p for p in PHASE_COLORS if any(s.get("phase") == p for s in steps)]
    phases += sorted({str(s.get("phase")) for s in steps} - set(phases))
    return [(phase, [number(s.get(key)) if str(s.get("phase")) == phase else None for s in steps])
            for phase in phases]


def steps_section(summary: dict) -> Markup:
    """HDBI and T_Orchestrate per step, one coloured series per phase."""
    steps = [s for s in summary.get("steps") or [] if (number(s.get("step")) or 0) >= 0]
    if not steps:
        return tag("p", "no per-step data (no step markers in the trace)", class_="missing")
    xs = [int(number(s.get("step")) if number(s.get("step")) is not None else i) for i, s in enumerate(steps)]
    parts = []
    for key, title, y_label, y_max in (("hdbi", "HDBI per step", "HDBI", 1.0),
                                       ("orchestration_us", "T_Orchestrate per step", "T_Orchestrate (µs)", None)):
        chart = step_chart(xs, _by_phase(steps, key), y_label, key, y_max=y_max)
        parts.append(tag("h3", title))
        parts.append(chart if chart is not None else
                     tag("p", f"{title}: not measured in any step (no device activity)", class_="missing"))
    return join(parts)


def timeline_section(analysis) -> Markup:
    from .timeline import render_timeline

    tables = getattr(analysis, "tables", None)
    if tables is None:
        return tag("p", "trace tables not available", class_="missing")
    svg, window = render_timeline(tables, getattr(analysis, "steps", None))
    if window is None:
        return svg
    return join([tag("p", f"{window.label}: {(window.end_ns - window.start_ns) / 1e3:,.1f} µs. ", window.note,
                     class_="note"), tag("div", svg, style="overflow-x:auto"),
                 partition_table(getattr(analysis, "host_partition", None), getattr(analysis, "steps", None))])


PARTITION_COLUMNS = ("host_python_ns", "host_dispatch_ns", "host_library_ns", "host_launch_api_ns",
                     "host_sync_ns", "host_other_api_ns", "host_untraced_ns", "host_blocked_ns", "host_stall_ns",
                     "host_thread_ns")


def partition_table(part: pd.DataFrame | None, steps: pd.DataFrame | None) -> Markup:
    """Host partition (µs) of the shown step, one row per thread."""
    from .timeline import representative_step

    if part is None or len(part) == 0:
        return tag("p", "no host partition (no host events in trace)", class_="missing")
    row = representative_step(steps)
    if row is not None and "step" in part.columns:
        part = part[part["step"] == row.get("step")]
    cols = [c for c in PARTITION_COLUMNS if c in part.columns]
    names = [c.removeprefix("host_").removesuffix("_ns") + " µs" for c in cols]
    head = tag("tr", tag("th", "thread"), *[tag("th", n) for n in names])
    rows = [tag("tr", tag("td", _thread_label(r)), *[_cell(getattr(r, c) / 1e3) for c in cols])
            for r in part.head(50).itertuples()]
    return join([tag("h3", "host partition of this step"), tag("table", head, *rows)])


def _thread_label(row) -> str:
    """``pid:tid``, marked when the thread launches no GPU work (kept out of the summary's partition)."""
    label = f"{row.pid}:{row.tid}"
    return label if getattr(row, "launches_work", True) else label + " (launches nothing)"


def stalls_section(summary: dict) -> Markup:
    """The frames that held the host stalls (meta ``host_stall_frames``)."""
    meta = summary.get("meta") or {}
    frames = meta.get("host_stall_frames") or []
    if not frames:
        return tag("p", "no host stall (no data-loading frame, no host piece above the stall threshold)",
                   class_="missing")
    head = tag("tr", *[tag("th", c) for c in ("innermost frame", "stalls", "host µs (Σ threads)", "GPU idle µs")])
    rows = [tag("tr", _name_cell(f["frame"]), _cell(f["stalls"], "calls"), _cell(f["us"]), _cell(f.get("idle_us")))
            for f in frames]
    return join([tag("h3", "host stalls"), tag("table", head, *rows)])


def ops_section(analysis, top: int = 15) -> Markup:
    ops = getattr(analysis, "ops", None)
    if ops is None or len(ops) == 0 or "orchestration_us" not in ops.columns:
        return tag("p", "no ATen ops linked to kernels", class_="missing")
    if "kernels" in ops.columns and (ops["kernels"] > 0).any():
        ops = ops[ops["kernels"] > 0]  # ops whose kernels are attributed to an inner op have none
    elif "host_us" in ops.columns:
        return _host_ops_table(ops, top)
    top_ops = ops.sort_values("orchestration_us", ascending=False, kind="stable").head(top)
    cols = [c for c in ("calls", "kernels", "orchestration_us") if c in top_ops.columns]
    head = tag("tr", tag("th", "op"), *[tag("th", c.replace("_us", " µs")) for c in cols])
    rows = [tag("tr", _name_cell(r["op_name"]), *[_cell(r[c], c) for c in cols])
            for _, r in top_ops.iterrows()]
    return tag("table", head, *rows)


def _host_ops_table(ops: pd.DataFrame, top: int) -> Markup:
    """Without kernels: the outermost ATen ops by inclusive host time."""
    rows_df = ops.sort_values("host_us", ascending=False, kind="stable").head(top)
    head = tag("tr", *[tag("th", c) for c in ("op (no device activity)", "outermost calls", "host µs")])
    rows = [tag("tr", _name_cell(r["op_name"]), _cell(r["root_calls"], "calls"), _cell(r["host_us"]))
            for _, r in rows_df.iterrows()]
    return tag("table", head, *rows)


def _kernel_frame(k: pd.DataFrame, key: str) -> pd.DataFrame:
    """kernels, orchestration µs (NaN when nothing measured) and device µs per ``key``."""
    frame = pd.DataFrame({key: k[key].astype(str).to_numpy(),
                          "orch_us": kernel_orchestration_ns(k).to_numpy() / 1e3,
                          "dur_us": pd.to_numeric(k["dur_ns"], errors="coerce").to_numpy() / 1e3})
    by = frame.groupby(key)
    g = pd.DataFrame({"kernels": by.size(), "orchestration_us": by["orch_us"].sum(min_count=1),
                      "device_us": by["dur_us"].sum()})
    return g.sort_values(["orchestration_us", "kernels"], ascending=False, na_position="last", kind="stable")


def kernels_section(analysis, key: str, title: str, top: int = 15) -> Markup:
    """Top kernel classes or kernel names by orchestration time."""
    k = getattr(analysis, "kernels", None)
    if k is None or len(k) == 0 or key not in k.columns:
        return tag("p", "no kernels in trace (no CUDA device activity)", class_="missing")
    g = _kernel_frame(k, key).head(top)
    head = tag("tr", *[tag("th", c) for c in (title, "kernels", "orchestration µs", "device µs")])
    rows = [tag("tr", _name_cell(name), _cell(r.kernels, "kernels"), _cell(r.orchestration_us),
                _cell(r.device_us)) for name, r in zip(g.index, g.itertuples())]
    return tag("table", head, *rows)


def diagnostics_section(summary: dict) -> Markup:
    s = summary.get("all") or {}
    counts = tag("p", f"orphan kernels: {fmt_value(s.get('orphan_kernels'), 'orphan_kernels')} · "
                      f"orphan launches: {fmt_value(s.get('orphan_launches'), 'orphan_launches')}")
    diags = summary.get("diagnostics") or {}
    if not diags:
        return join([counts, tag("p", "no diagnostics", class_="note")])
    head = tag("tr", *[tag("th", c) for c in ("code", "severity", "count", "example")])
    rows = [tag("tr", tag("td", code), tag("td", d.get("severity", "")), _cell(d.get("count"), "kernels"),
                _name_cell(d.get("example", ""))) for code, d in sorted(diags.items())]
    return join([counts, tag("table", head, *rows)])


def health_section(summary: dict) -> Markup:
    """Trace health (decompose/health.py): pass or warn per check, with its numbers and what it affects."""
    checks = summary.get("health") or []
    if not checks:
        return tag("p", "no health checks in this summary", class_="note")
    head = tag("tr", *[tag("th", c) for c in ("check", "status", "numbers", "affects")])
    rows = [tag("tr", tag("td", c["check"]), tag("td", c["status"], class_=c["status"]), tag("td", c["detail"]),
                tag("td", c.get("affects") or "")) for c in checks]
    return tag("table", head, *rows)


def advice_section(summary: dict) -> Markup:
    """The next optimization target (rules in taxbreak/report/advice.py)."""
    from .advice import advise

    items = [tag("li", tag("b", item.finding), tag("br"), "→ " + item.action) for item in advise(summary)]
    return tag("ul", *items)


def render_html(analysis, manifest: dict | None = None, title: str | None = None) -> str:
    """The whole report as one HTML string (see module docstring).

    Args:
        analysis: an ``Analysis`` (summary, kernels, steps, ops, host_partition, tables).
        manifest: the run manifest (model, shape, GPU, CPU), or None for a bare trace.
        title: shown in the heading and the page title (e.g. the input path).
    """
    summary = _summary(analysis)
    body = join([header(analysis, manifest, title), tag("h2", "Trace health"), health_section(summary),
                 cards(summary.get("all") or {}),
                 tag("h2", "What to do"), advice_section(summary),
                 tag("h2", "Orchestration components vs device-active time, per phase"), phase_section(summary),
                 tag("h2", "Per step"), steps_section(summary), serving_sections(summary),
                 tag("h2", "Timeline of a representative step"), timeline_section(analysis),
                 tag("h2", "Top ATen ops by orchestration time"), ops_section(analysis),
                 tag("h2", "Kernel classes by orchestration time"),
                 kernels_section(analysis, "kernel_class", "kernel class"),
                 tag("h2", "Top kernels by orchestration time"), kernels_section(analysis, "name", "kernel"),
                 tag("h2", "Diagnostics"), diagnostics_section(summary)])
    page_title = f"taxbreak report — {title}" if title else "taxbreak report"
    head = join([void("meta", charset="utf-8"), void("meta", http_equiv="Content-Security-Policy", content=CSP),
                 tag("title", page_title), tag("style", Markup(CSS))])
    script = Markup(f"<script>{SCRIPT}</script>")  # a fixed file of the package, never trace text
    return "<!DOCTYPE html>\n" + tag("html", tag("head", head), tag("body", body, script), lang="en") + "\n"
