"""The sweep's static SVG charts drawn by matplotlib's SVG backend (docs/sweep.md).

Each chart is a :class:`matplotlib.figure.Figure` on its own
``FigureCanvasSVG`` (no pyplot, so no global figure state), saved with
settings that make the text deterministic and self-contained:

* ``svg.fonttype = "none"``: labels stay ``<text>`` (searchable, selectable,
  small) in the page's own sans-serif font instead of glyph paths;
* ``svg.hashsalt``: the ids matplotlib derives for clip paths and markers come
  from a fixed salt per chart (so the same input gives the same bytes, and two
  charts on one page never share an id);
* no date metadata; ``bbox_inches="tight"`` so no label is cut;
* every id prefixed by the chart's name, so the inline charts of one page
  never repeat an id (matplotlib names its groups ``figure_1``, ``axes_1``…).

The result is an ``<svg>`` element with no script, no external reference and
only inline style, which the report's Content-Security-Policy allows.
matplotlib is imported here only: callers import this module when they render.
"""
from __future__ import annotations

import io
import re

from matplotlib import rc_context
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure

from ..report.markup import Markup

RC = {"svg.fonttype": "none", "font.family": "sans-serif", "font.sans-serif": ["DejaVu Sans"],
      "font.size": 9, "axes.titlesize": 10, "text.parse_math": False, "text.usetex": False,
      "axes.spines.top": False, "axes.spines.right": False, "legend.frameon": False, "svg.image_inline": True}
WIDTH_IN = 8.6
_PROLOGUE = re.compile(r"\A.*?(?=<svg)", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.S)
_IDS = re.compile(r'(id="|url\(#|href="#)')


def figure(height_in: float, width_in: float = WIDTH_IN) -> Figure:
    """A new figure with its own SVG canvas."""
    # no layout engine: ``bbox_inches="tight"`` at save time already takes in every label,
    # and constrained layout would cost a second draw (40 % of the report's chart time)
    fig = Figure(figsize=(width_in, height_in), dpi=72)
    FigureCanvasSVG(fig)
    return fig


def to_svg(fig: Figure, label: str, salt: str) -> Markup:
    """The figure as one inline ``<svg>`` element (no XML prologue or DOCTYPE)."""
    buf = io.StringIO()
    with rc_context({**RC, "svg.hashsalt": f"taxbreak:{salt}"}):
        fig.savefig(buf, format="svg", bbox_inches="tight", pad_inches=0.05, metadata={"Date": None})
    text = _METADATA.sub("", _PROLOGUE.sub("", buf.getvalue(), count=1), count=1)
    text = _IDS.sub(lambda m: f"{m.group(1)}{salt}-", text)
    text = text.replace("<svg ", f'<svg role="img" aria-label="{_attr(label)}" ', 1)
    return Markup(text.strip())


def _attr(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def tick_text(value: float, _pos=None) -> str:
    """A tick in plain digits with thousands separators (no ``1e7`` offset above the axis)."""
    if value == 0:
        return "0"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.3g}"


def plain_ticks(axis) -> None:
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(tick_text))


def legend_below(ax, handles=None, ncol: int = 3, gap_in: float = 0.5, **kw) -> None:
    """A legend under the x-axis label, ``gap_in`` inches below the axes whatever their height."""
    height_in = ax.get_position().height * ax.figure.get_figheight()
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -gap_in / height_in), ncol=ncol,
              fontsize=kw.pop("fontsize", 8), **kw)


def style():
    """The chart style, as a context: rc settings are read while artists are created as
    well as when the SVG is written (``rc_context`` restores the previous ones after)."""
    return rc_context(RC)
