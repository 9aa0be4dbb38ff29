"""Rich tables for a diff dict from :func:`taxbreak.report.diff.diff_analyses`.

Durations print as the main report prints them (terminal_fit.duration: at most four digits,
then ms, then s), so a 2 s step and a 12 µs op read the same way in both commands.
"""
from __future__ import annotations

import io
import math

from rich.console import Console
from rich.table import Table

from .console_text import markup_text
from .diff import HOST_METRICS, IDLE_CAUSE_PREFIX
from .metrics import METRIC_LABELS, fmt_value, is_missing
from .terminal_fit import duration
from .words import NOT_MEASURED

_LABELS = METRIC_LABELS
_UNITLESS = ("hdbi", "kernels", "launches", "kernels_per_token", "aten_ops", "aten_ops_per_token")


def fmt_cell(value, key: str = "", missing: str = NOT_MEASURED) -> str:
    """A count or ratio as :func:`fmt_value` gives it, any other metric (µs) as a duration."""
    if is_missing(value):
        return missing
    return fmt_value(value, key) if key in _UNITLESS else duration(value)


def fmt_delta(delta: float | None, key: str = "") -> str:
    if delta is None:
        return NOT_MEASURED
    sign = "+" if delta > 0 else ""
    return sign + fmt_cell(delta, key)


def fmt_pct(pct: float | None) -> str:
    if pct is None:
        return NOT_MEASURED
    if math.isinf(pct):
        return "+∞ %" if pct > 0 else "-∞ %"
    return f"{pct:+.1f} %"


def scope_table(scope: str, changes: dict, labels: dict) -> Table:
    present = changes["present"]
    note = "" if present["base"] and present["new"] else \
        f" (only in {'base' if present['base'] else 'new'})"
    table = Table(title=f"{markup_text(scope)}{note}", title_justify="left")
    for col in ("metric", "base", "new", "Δ", "Δ %"):
        table.add_column(col, justify="left" if col == "metric" else "right")
    previous = None
    for key, c in changes.items():
        if key == "present":
            continue
        if _section(key) != _section(previous) and previous is not None:
            table.add_section()
        previous = key
        table.add_row(_label(key), fmt_cell(c["base"], key), fmt_cell(c["new"], key),
                      fmt_delta(c["delta"], key), fmt_pct(c["delta_pct"]))
    return table


def _section(key: str | None) -> str:
    """Rows are ruled off in three groups: the TaxBreak metrics, idle by cause, the host partition."""
    return "idle" if key and key.startswith(IDLE_CAUSE_PREFIX) else "host" if key in HOST_METRICS else "main"


def _label(key: str) -> str:
    if key.startswith(IDLE_CAUSE_PREFIX):
        return "GPU idle: " + markup_text(key[len(IDLE_CAUSE_PREFIX):].replace("_", " "))
    return _LABELS.get(key, key)


def group_table(title: str, key: str, rows: list[dict]) -> Table:
    table = Table(title=title, title_justify="left")
    for col in (key, "base", "new", "Δ", "Δ %"):
        table.add_column(col, justify="left" if col == key else "right", overflow="fold")
    for r in rows:
        table.add_row(_short(r[key]), fmt_cell(r["base"], missing="absent"),
                      fmt_cell(r["new"], missing="absent"), fmt_delta(r["delta"]), fmt_pct(r["delta_pct"]))
    return table


def kernels_table(title: str, rows: list[dict], total: int) -> Table:
    shown = f"{total} name{'s' if total != 1 else ''}" + (f", top {len(rows)} by count" if total > len(rows) else "")
    table = Table(title=f"{title}: {shown}" if total else f"{title}: none", title_justify="left")
    table.add_column("kernel", overflow="fold")
    table.add_column("count", justify="right")
    for r in rows:
        table.add_row(_short(r["name"]), f"{r['count']:,}")
    return table


def _short(name: str, limit: int = 90) -> str:
    """A name cut to ``limit`` characters, terminal-safe and markup-escaped (names come from traces)."""
    return markup_text(name if len(name) <= limit else name[: limit - 1] + "…")


def diff_tables(diff: dict) -> list[Table]:
    """Every table of the diff, in display order."""
    labels = diff["labels"]
    tables = [scope_table(scope, changes, labels) for scope, changes in diff["scopes"].items()]
    tables.append(group_table("ATen ops that moved most (orchestration)", "op_name", diff["ops"]))
    tables.append(group_table("kernel classes that moved most (orchestration)", "kernel_class",
                              diff["kernel_classes"]))
    k = diff["kernels"]
    tables.append(kernels_table("kernels only in base", k["only_in_base"], k["only_in_base_count"]))
    tables.append(kernels_table("kernels only in new", k["only_in_new"], k["only_in_new_count"]))
    return tables


def render_diff_text(diff: dict, width: int = 110) -> str:
    """The diff as plain text (no colour), as printed by ``taxbreak diff``."""
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False, legacy_windows=False)
    console.print(f"base: {markup_text(diff['labels']['base'])}\nnew:  {markup_text(diff['labels']['new'])}")
    for table in diff_tables(diff):
        console.print(table)
    return buf.getvalue()
