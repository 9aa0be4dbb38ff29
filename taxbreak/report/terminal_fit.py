"""Terminal tables that fit the console: durations in µs, ms or s, wide tables split into column groups.

A per-phase table of eleven metrics needs ~170 columns at µs resolution; a pipe or a CI log
gives 80. Two rules keep every cell whole at any width:

* a duration never shows more than four digits: 999.9 µs, 9,999 µs, then 10.0 ms
  to 999.9 ms, then 1.00 s (``duration``);
* a table whose numeric columns do not fit is printed as several tables, each repeating the
  key column, titled "(1/2)", "(2/2)" (``print_fitted``). Numeric cells never wrap or get an
  ellipsis; text columns fold onto the next line instead.
"""
from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table

NA = "n/a"  # a value the trace cannot give; its reason is printed under the table

# a rich table with the default box: one border column, plus per column two padding and one rule
_TABLE_EDGE, _COLUMN_EXTRA = 1, 3


def duration(us, na: str = NA) -> str:
    """``us`` µs in µs, ms or s, at most four digits before the point; ``na`` for a missing value."""
    if us is None or us != us:
        return na
    value = float(us)
    if abs(value) < 1e3:
        return f"{value:.1f} µs"
    if abs(value) < 1e4:
        return f"{value:,.0f} µs"
    if abs(value) < 1e6:
        return f"{value / 1e3:,.1f} ms"
    return f"{value / 1e6:,.2f} s"


@dataclass
class Column:
    """One column of a fitted table: its header and its already formatted cells."""

    header: str
    cells: list[str]
    justify: str = "right"

    @property
    def width(self) -> int:
        return max([cell_len(line) for line in self.header.split("\n")] + [cell_len(c) for c in self.cells])


def column_groups(key: Column, columns: list[Column], width: int) -> list[list[Column]]:
    """The columns in order, cut into groups that fit ``width`` beside the key column (at least one each)."""
    room = width - _TABLE_EDGE - key.width - _COLUMN_EXTRA
    groups: list[list[Column]] = [[]]
    used = 0
    for column in columns:
        need = column.width + _COLUMN_EXTRA
        if groups[-1] and used + need > room:
            groups.append([])
            used = 0
        groups[-1].append(column)
        used += need
    return groups


def print_fitted(console: Console, title: str, key: Column, columns: list[Column]) -> None:
    """Print ``key`` + ``columns`` as one table, or as several that each fit the console's width."""
    groups = column_groups(key, columns, console.width)
    for i, group in enumerate(groups, 1):
        part = f" ({i}/{len(groups)})" if len(groups) > 1 else ""
        table = Table(title=title + part, title_justify="left")
        table.add_column(key.header, justify=key.justify, no_wrap=True, min_width=key.width)
        for column in group:
            table.add_column(column.header, justify=column.justify, no_wrap=True, min_width=column.width)
        for r, name in enumerate(key.cells):
            table.add_row(name, *(column.cells[r] for column in group))
        console.print(table)


def print_notes(console: Console, notes: dict[str, str]) -> None:
    """The reason of each n/a under its table: ``n/a: ΔCT: the trace records no CUDA library calls``."""
    for what, reason in notes.items():
        console.print(f"  {NA}: {what}: {reason}", highlight=False)
