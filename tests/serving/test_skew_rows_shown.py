"""The terminal's per-step skew table shows the steps with the most skew, not the first ones."""
from __future__ import annotations

from rich.console import Console

from taxbreak.report.serving import _most_skewed_steps, _render_rank_steps


def _rows(skew_by_step: dict[int, float]) -> list[dict]:
    rows = []
    for step, skew in skew_by_step.items():
        for rank, share in (("r0", 1.0), ("r1", 0.0)):  # rank 0 waits, rank 1 is the late one
            rows.append({"step": step, "rank": rank, "wall_us": 1000.0, "skew_us": skew * share,
                         "transfer_us": 10.0, "compute_us": 900.0 - skew * share, "idle_us": 90.0,
                         "exposed_host_us": 5.0, "hdbi": None, "hdbi_reason": "planted", "residual_us": 0.0})
    return rows


def test_a_long_run_shows_its_most_skewed_steps_in_step_order():
    skew = {step: float(step % 7) for step in range(30)}  # 60 rows: more than 4 x top
    skew[3], skew[25] = 500.0, 400.0
    shown = _most_skewed_steps(_rows(skew), top=2)
    assert [(row["step"], row["rank"]) for row in shown] == [(3, "r0"), (3, "r1"), (25, "r0"), (25, "r1")]
    console = Console(record=True, width=120)
    _render_rank_steps(_rows(skew), ["r0", "r1"], console, top=2)
    text = " ".join(console.export_text().split())  # rich wraps long lines
    assert "(the 2 steps with the most skew)" in text and "56 more rows in --json" in text


def test_a_short_run_shows_every_row():
    rows = _rows({0: 1.0, 1: 2.0})
    assert _most_skewed_steps(rows, top=2) == rows
    console = Console(record=True, width=120)
    _render_rank_steps(rows, ["r0", "r1"], console, top=2)
    assert "most skew" not in console.export_text()
