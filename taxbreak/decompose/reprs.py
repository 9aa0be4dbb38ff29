"""How an :class:`~taxbreak.decompose.analysis.Analysis` shows itself in a REPL or a notebook.

The dataclass ``repr`` would print six DataFrames; these say what was analysed
and its headline numbers in one line (``repr``) or one small table
(``_repr_html_``, escaped: trace and phase names come from the trace).
"""
from __future__ import annotations

import html
from pathlib import Path

from ..trace.words import NOT_MEASURED
from .accessors import PhaseValues, phase_names, phase_values

# (column header, PhaseValues field, digits) of the notebook table
_HTML_COLUMNS = (("steps", "steps", 0), ("kernels", "kernels", 0), ("HDBI", "hdbi", 3),
                 ("device active µs", "device_active_us", 1), ("T_orchestrate µs", "orchestration_us", 1),
                 ("ΔFT µs", "ft_us", 1), ("ΔCT µs", "ct_us", 1), ("ΔKT µs", "kt_us", 1))


def trace_name(summary: dict) -> str:
    """The trace's file name, or ``<tables>`` when the analysis was handed tables without a path."""
    path = (summary.get("meta") or {}).get("path")
    return Path(str(path)).name if path else "<tables>"


def fmt(value, digits: int) -> str:
    """A number with thousands separators, or ``not measured`` for None."""
    if value is None:
        return NOT_MEASURED
    return f"{value:,.{digits}f}" if digits else f"{int(value):,}"


def _hdbi_text(values: PhaseValues) -> str:
    if values.hdbi is not None:
        return f"HDBI {values.hdbi:.3f}"
    return f"HDBI {NOT_MEASURED}" + (f" ({values.hdbi_reason})" if values.hdbi_reason else "")


def _count(n: int | None, word: str) -> str:
    if n is None:
        return f"{word}s {NOT_MEASURED}"
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def analysis_repr(analysis) -> str:
    """``<Analysis trace.json.gz (kineto): 3 kernels, 1 step, phases unknown, HDBI 0.324>``."""
    summary = analysis.summary
    whole = phase_values(summary, "all")
    fmt_name = (summary.get("meta") or {}).get("source_format")
    phases = ", ".join(phase_names(summary)[1:]) or "none"
    source = f" ({fmt_name})" if fmt_name else ""
    return (f"<Analysis {trace_name(summary)}{source}: {_count(whole.kernels, 'kernel')}, "
            f"{_count(whole.steps, 'step')}, phases {phases}, {_hdbi_text(whole)}>")


def analysis_repr_html(analysis) -> str:
    """A small HTML table: one row per phase (``all`` first) with the headline values."""
    summary = analysis.summary
    head = "".join(f"<th>{html.escape(label)}</th>" for label, _, _ in _HTML_COLUMNS)
    rows = [_html_row(phase_values(summary, name)) for name in phase_names(summary)]
    caption = html.escape(f"Analysis of {trace_name(summary)}")
    return (f"<table><caption>{caption}</caption><thead><tr><th>phase</th>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")


def _html_row(values: PhaseValues) -> str:
    cells = "".join(f"<td>{html.escape(fmt(getattr(values, field), digits))}</td>"
                    for _, field, digits in _HTML_COLUMNS)
    return f"<tr><th>{html.escape(values.name)}</th>{cells}</tr>"
