"""HTML sections of the serving figures (docs/serving.md): overlap per step, CUDA-graph launch
cost, and the cross-rank skew object of ``taxbreak ranks``. Every trace string is escaped by
:func:`tag`; unmeasured values are ``not measured`` with the reason."""
from __future__ import annotations

from .markup import Markup, join, tag
from .words import NOT_MEASURED


def _v(value, pattern: str = "{:,.1f}") -> str:
    return NOT_MEASURED if value is None else pattern.format(value)


def _table(columns: tuple[str, ...], rows: list[list]) -> Markup:
    head = tag("tr", *[tag("th", c) for c in columns])
    return tag("table", head, *[tag("tr", *[tag("td", c) for c in row]) for row in rows])


def _missing(text: str) -> Markup:
    return tag("p", text, class_="missing")


def overlap_section(summary: dict, top: int = 10) -> Markup:
    """Hidden and exposed host preparation per step, the blocking call, the what-if idle."""
    o = summary.get("overlap")
    if not o:
        return _missing("overlap per step: not in this summary")
    if o.get("reason"):
        return _missing(f"overlap per step: {NOT_MEASURED} ({o['reason']})")
    note = tag("p", f"{o['steps_measured']} steps: {o['masked_steps']} masked, {o['exposed_steps']} exposed; "
                    f"preparation {_v(o['prep_us'])} µs = hidden {_v(o['hidden_us'])} + exposed {_v(o['exposed_us'])}; "
                    f"what-if idle (preparation overlapping the pending device work, no blocking call) "
                    f"{_v(o['what_if_idle_us'])} µs", class_="note")
    worst = sorted(o["steps"], key=lambda s: -s["exposed_us"])[:top]
    rows = [[s["step"], s["overlap"], _v(s["prep_us"]), _v(s["hidden_us"]), _v(s["exposed_us"]),
             _v(s["pending_device_us"]), _v(s["what_if_idle_us"]),
             _named(s["blocking_call"], s["blocking_call_us"]),
             _named(s.get("longest_frame"), s.get("longest_frame_us"))] for s in worst]
    return join([note, _table(("step", "overlap", "prep µs", "hidden µs", "exposed µs", "pending device µs",
                               "what-if idle µs", "blocking call before the first launch",
                               "longest host frame before it"), rows)])


def _named(name, us) -> str:
    return "none" if name is None else f"{name} ({_v(us)} µs)"


def graph_cost_section(summary: dict) -> Markup:
    """Host time of a graph launch against its nodes, fitted per GPU, and the split projection."""
    cost = summary.get("graph_launch_cost")
    if not cost or cost.get("reason"):
        return _missing(f"graph launch cost: {NOT_MEASURED} ({(cost or {}).get('reason') or 'not in this summary'})")
    rows = [[gpu, d["launches"], d["sizes"], _v(d["nodes_median"], "{:,.0f}"), _v(d["host_us_median"]),
             _v(d["host_us_per_node"], "{:.3f}"), _v(d["a_us"], "{:.2f}"), _v(d["b_us_per_node"], "{:.3f}"),
             _v(d["r2"], "{:.2f}"), d["fit_reason"] or "; ".join(f"{s['pieces']}: {_v(s['step_us'])} µs"
                                                                 for s in d["split"])]
            for gpu, d in cost["devices"].items()]
    return _table(("GPU", "launches", "sizes", "median nodes", "median µs", "µs/node", "a µs", "b µs/node", "r²",
                   "median graph split into k pieces"), rows)


def serving_sections(summary: dict) -> Markup:
    """The per-trace serving sections of the report, with their headings."""
    return join([tag("h2", "Overlap per step (host preparation hidden or exposed)"), overlap_section(summary),
                 tag("h2", "CUDA-graph launch cost per node"), graph_cost_section(summary)])


def ranks_section(ranks: dict) -> Markup:
    """The ``ranks`` object of ``taxbreak ranks``: lateness, causes, per step and rank."""
    if ranks.get("reason"):
        return _missing(f"cross-rank skew: {NOT_MEASURED} ({ranks['reason']})")
    late = ranks["lateness_us"]
    note = tag("p", f"{ranks['collectives']} collectives of {', '.join(ranks['ranks'])}, aligned on "
                    f"{ranks['alignment']}; lateness median {_v(late['median'])} µs, p90 {_v(late['p90'])} µs, "
                    f"max {_v(late['max'])} µs", class_="note")
    causes = _table(("layer", "late − earliest rank µs", "top cause of"),
                    [[k, _v(v), ranks["top_cause_counts"].get(k, 0)] for k, v in ranks["cause_us"].items() if v])
    steps = _table(("step", "rank", "wall µs", "skew µs", "transfer µs", "compute µs", "idle µs", "exposed host µs",
                    "HDBI"), [[s["step"], s["rank"], *[_v(s[k]) for k in ("wall_us", "skew_us", "transfer_us",
                                                                         "compute_us", "idle_us", "exposed_host_us")],
                               _v(s["hdbi"], "{:.3f}")] for s in ranks["steps"]])
    worst = sorted(ranks.get("per_collective", []), key=lambda c: -(c["lateness_us"] or 0))[:20]
    collectives = _table(("collective", "family", "step", "late rank", "lateness µs", "transfer µs", "cause",
                          "late rank's T_launch µs"),
                         [[c["collective"], c["family"], c["step"], c["late_rank"] or "none", _v(c["lateness_us"]),
                           _v(c["transfer_us"]), c["cause"] or c["cause_reason"] or NOT_MEASURED,
                           _v(c["late_t_launch_us"])] for c in worst])
    return join([note, causes, tag("h3", "most skewed collectives"), collectives,
                 tag("h3", "per step and rank"), steps])


def render_ranks_html(ranks: dict, title: str | None = None) -> str:
    """A self-contained page (the report's CSP and style) with the cross-rank skew."""
    from .html import CSP, CSS
    from .markup import void

    page_title = f"taxbreak ranks — {title}" if title else "taxbreak ranks"
    head = join([void("meta", charset="utf-8"), void("meta", http_equiv="Content-Security-Policy", content=CSP),
                 tag("title", page_title), tag("style", Markup(CSS))])
    body = join([tag("h1", page_title), tag("h2", "Cross-rank skew"), ranks_section(ranks)])
    return "<!DOCTYPE html>\n" + tag("html", tag("head", head), tag("body", body), lang="en") + "\n"
