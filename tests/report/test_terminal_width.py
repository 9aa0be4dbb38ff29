"""The terminal report at 80, 100 and 200 columns: every line fits, the verdict and the headline
figures come first, nothing is cut (no ellipsis, every cell whole), n/a carries its reason, the
top-ops table ranks only measured ops, and durations read in µs, ms or s."""
from __future__ import annotations

import gzip
import io
import json
import re

import pytest
from rich.cells import cell_len
from rich.console import Console

from conftest import shared_trace_paths
from taxbreak.decompose import analyze
from taxbreak.report.terminal import HOST_PHASE_COLUMNS, PHASE_COLUMNS, fmt, has_device, render_analysis
from taxbreak.report.terminal_fit import Column, column_groups, duration

from .traces import BASE_NS, _kernel, _x, planted_events

HEADLINE = ("HDBI", "T_Orchestrate", "device active", "GPU idle", "top idle cause")
REAL = ("benchmark_result_2869224_1695835535_trace.json.gz", "mfu_2gpu_before.sqlite",
        "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")


def _render(analysis, width: int) -> str:
    out = io.StringIO()
    render_analysis(analysis, Console(file=out, width=width, color_system=None, highlight=False))
    return out.getvalue()


def _planted_with_between(path):
    """The planted trace plus a kernel launched after the step (the ``between`` phase), an op that
    launched nothing, and one CUPTI overhead event."""
    events = planted_events() + [
        _x("cpu_op", "aten::empty", 130, 4, **{"External id": 3}),
        _x("cpu_op", "aten::mul", 140, 20, **{"External id": 4}),
        _x("cuda_runtime", "cudaLaunchKernel", 145, 3, correlation=104, **{"External id": 4, "cbid": 211}),
        _kernel("void at::native::mul_kernel", 150, 300, 104, 4),
        _x("overhead", "CUPTI Overhead", 460, 2, pid=0, tid=0),
    ]
    doc = {"schemaVersion": 1, "baseTimeNanoseconds": BASE_NS,
           "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}], "traceEvents": events}
    path.write_bytes(gzip.compress(json.dumps(doc).encode(), mtime=0))
    return path


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return analyze(_planted_with_between(tmp_path_factory.mktemp("w") / "t.json.gz"), floor_us=4.5)


REAL_CASES = [pytest.param(p, id=p.name) for p in shared_trace_paths() if p.name in REAL]


@pytest.fixture(scope="module", params=REAL_CASES)
def real(request):
    return analyze(request.param)


def _check_fits(analysis) -> None:
    text = _render(analysis, 80)
    lines = text.splitlines()
    too_wide = [line for line in lines if cell_len(line) > 80]
    assert not too_wide, too_wide[:3]
    head = text[: text.index("┏")]  # before the first table
    for label in HEADLINE:
        assert re.search(rf"^{label} +\S", head, re.M), label
    assert "Verdict:" in head


def _check_nothing_cut(analysis, width: int) -> None:
    text = _render(analysis, width)
    cells = [line for line in text.splitlines() if line[:1] in "│┃"]
    assert not [line for line in cells if "…" in line]
    summary = analysis.summary
    columns = PHASE_COLUMNS if has_device(summary) else HOST_PHASE_COLUMNS
    scopes = [summary["all"], *summary["phases"].values()]
    for key, _, pattern in columns:
        for scope in scopes:
            assert fmt(scope.get(key), pattern) in text, (key, fmt(scope.get(key), pattern))
    for _, label, _ in columns:
        assert label.split("\n")[0] in text, label


def test_planted_report_fits_80_columns(planted):
    _check_fits(planted)


@pytest.mark.parametrize("width", [100, 200])
def test_planted_report_cuts_nothing(planted, width):
    _check_nothing_cut(planted, width)


def test_real_reports_fit_80_columns(real):
    _check_fits(real)


@pytest.mark.parametrize("width", [100, 200])
def test_real_reports_cut_nothing(real, width):
    _check_nothing_cut(real, width)


def test_between_row_shows_its_measured_kernel_and_is_explained(planted):
    between = planted.summary["phases"]["between"]
    assert between["kernels"] == 1 and between["device_active_us"] == pytest.approx(300.0)
    text = _render(planted, 200)
    row = next(line for line in text.splitlines() if line.startswith("│ between "))
    assert "300.0 µs" in row
    # its launch has no Python frame above it: T_orch and HDBI are n/a with that reason, not "not measured"
    reason = between["hdbi_reason"]
    assert f"n/a: T_orch (between): {reason}" in text and f"n/a: HDBI (between): {reason}" in text
    assert "between = time outside every prefill/decode step range" in text
    assert "n/a: kernels /token (between): no tokens are produced outside the prefill/decode steps" in text


def test_top_ops_rank_only_ops_that_launched_kernels(planted):
    text = _render(planted, 200)
    table = text[text.index("ATen ops by orchestration time"):text.index("launched no kernel")]
    assert "aten::empty" not in table and "aten::mul" in table
    ranked = int(planted.ops["kernels"].gt(0).sum())
    assert f"Top {ranked} ATen ops" in text
    assert f"{len(planted.ops) - ranked} op" in text


def test_cupti_overhead_is_ordinary_profiler_cost(planted):
    diag = planted.summary["diagnostics"]["event.profiler_overhead"]
    assert diag["severity"] == "info" and diag["count"] == 1
    assert "event.unknown_category" not in planted.summary["diagnostics"]


def test_kineto_library_time_is_na_with_the_reason(planted):
    text = _render(planted, 200)
    assert "n/a: CUDA library: Kineto traces do not record CUDA library (cuBLAS/cuDNN) calls" in text
    row = next(line for line in text.splitlines() if line.startswith("│ CUDA library "))
    assert "n/a" in row and "0.0" not in row


@pytest.mark.parametrize("us, text", [(None, "n/a"), (float("nan"), "n/a"), (0.0, "0.0 µs"), (999.94, "999.9 µs"),
                                      (1234.4, "1,234 µs"), (9999.4, "9,999 µs"), (10_000.0, "10.0 ms"),
                                      (999_940.0, "999.9 ms"), (1_000_000.0, "1.00 s"), (43_425_365.0, "43.43 s")])
def test_durations_keep_at_most_four_digits(us, text):
    assert duration(us) == text


def test_column_groups_fit_the_width_and_keep_the_order():
    key = Column("phase", ["all", "decode"])
    columns = [Column(f"c{i}", ["12,345.6 µs"]) for i in range(9)]
    groups = column_groups(key, columns, 80)
    assert [c for g in groups for c in g] == columns and len(groups) > 1
    for group in groups:
        assert 1 + (key.width + 3) + sum(c.width + 3 for c in group) <= 80
    assert column_groups(key, columns, 400) == [columns]
