"""Every GPU-idle cause of the decomposer has its terminal row, chart colour and advice, in the
decomposer's order: the reports iterate their own tables, so a cause missing there would
silently drop out of a report."""
from __future__ import annotations

from taxbreak.decompose.idle import CAUSES
from taxbreak.report.advice import ACTIONS, CAUSE_TARGETS
from taxbreak.report.svg import IDLE_COLORS
from taxbreak.report.terminal import IDLE_ROWS


def test_terminal_rows_and_chart_colours_cover_every_cause_in_order():
    assert [key for key, _ in IDLE_ROWS] == list(CAUSES)
    assert list(IDLE_COLORS) == list(CAUSES)


def test_every_cause_the_host_or_device_caused_has_advice():
    caused = set(CAUSES) - {"nothing_pending"}
    assert set(CAUSE_TARGETS) == caused
    assert all(target is not None or cause in ACTIONS for cause, (target, _) in CAUSE_TARGETS.items())
