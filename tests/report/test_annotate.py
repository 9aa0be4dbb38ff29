"""``taxbreak annotate``: exact planted slices, original bytes kept, tracks beside
their threads, flow arrows, lane layout, and an unchanged re-analysis."""
from __future__ import annotations

import gzip
from decimal import Decimal
from types import SimpleNamespace

import msgspec
import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from taxbreak.cli.main import main
from taxbreak.decompose import analyze
from taxbreak.readers import load_trace
from taxbreak.report.annotate import (CATEGORY, LATENCY_NAME, MAX_LANES, QUEUE_NAME, TID_BASE, assign_lanes,
                                      build_events, nested_subset, write_annotated)
from taxbreak.report.annotate_io import splice_events, us_text
from taxbreak.trace import TraceMeta, TraceTables
from taxbreak.trace.errors import UnsupportedFormatError

from .traces import EPOCH_US, EXPECTED_HOST, EXPECTED_QUEUE, FLOOR_US, write_planted


class Event(msgspec.Struct, forbid_unknown_fields=False):
    """An event with its times kept as the JSON text they were written as."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: object = None
    tid: object = None
    ts: msgspec.Raw = msgspec.Raw(b"null")
    dur: msgspec.Raw = msgspec.Raw(b"null")
    id: object = None
    bp: str = ""
    args: dict = {}

    def us(self, field: str = "ts") -> Decimal:
        return Decimal(bytes(getattr(self, field)).decode())


def _text(path) -> bytes:
    raw = path.read_bytes()
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def _events(path) -> list[Event]:
    return msgspec.json.decode(_text(path), type=Doc).traceEvents


class Doc(msgspec.Struct):
    traceEvents: list[Event]


def _annotate(tmp_path, epoch=False, name="out.json.gz", **kw):
    trace = write_planted(tmp_path / "planted.json", epoch=epoch)
    analysis = analyze(trace, floor_us=FLOOR_US)
    out = tmp_path / name
    stats = write_annotated(trace, analysis, out, **kw)
    return trace, analysis, out, stats, [e for e in _events(out) if e.cat == CATEGORY]


def _slices(added, names, shift=0):
    return sorted((e.name, float(e.us() - shift), float(e.us("dur"))) for e in added
                  if e.ph == "X" and e.name in names)


HOST_NAMES = {"ΔFT python", "ΔFT dispatch", "ΔCT library", "ΔKT floor"}


@pytest.mark.parametrize("epoch", [False, True])
def test_added_slices_have_the_planted_durations_in_the_trace_time_base(tmp_path, epoch):
    _, _, _, stats, added = _annotate(tmp_path, epoch=epoch)
    shift = EPOCH_US if epoch else 0
    assert _slices(added, HOST_NAMES, shift) == EXPECTED_HOST
    assert _slices(added, {LATENCY_NAME}, shift) == EXPECTED_QUEUE
    # K2 waits from L2 + floor (30.5) until K1 ends (35.0): the only queue wait
    assert _slices(added, {QUEUE_NAME}, shift) == [(QUEUE_NAME, 30.5, 4.5)]
    assert stats.kernels == 3 and stats.overflow == 0
    assert stats.slices == {"ΔCT library": 1, "ΔFT dispatch": 3, "ΔFT python": 2, "ΔKT floor": 3,
                            QUEUE_NAME: 1, LATENCY_NAME: 3, "GPU idle": 14, "GPU idle caused": 13}


def test_times_are_exact_decimal_text():
    assert bytes(us_text(1_712_195_495_521_131_125)) == b"1712195495521131.125"
    assert bytes(us_text(7)) == b"0.007" and bytes(us_text(-1500)) == b"-1.500"


def test_splice_keeps_the_array_text_and_handles_an_empty_array():
    assert splice_events(b'[ {"a": 1.10} ]', b'{"b":2}') == b'[{"a": 1.10},{"b":2}]'
    assert splice_events(b"[\n]", b'{"b":2}') == b'[{"b":2}]'
    assert splice_events(b"[1]", b"") == b"[1]"


@pytest.mark.parametrize("epoch", [False, True])
def test_original_events_and_keys_are_copied_byte_for_byte(tmp_path, epoch):
    trace, _, out, _, _ = _annotate(tmp_path, epoch=epoch, name="out.json")
    original = msgspec.json.decode(trace.read_bytes(), type=dict[str, msgspec.Raw])
    annotated = msgspec.json.decode(out.read_bytes(), type=dict[str, msgspec.Raw])
    assert list(annotated) == list(original)
    for key in original:
        if key != "traceEvents":
            assert bytes(annotated[key]) == bytes(original[key])
    events_in = msgspec.json.decode(bytes(original["traceEvents"]), type=list[msgspec.Raw])
    events_out = msgspec.json.decode(bytes(annotated["traceEvents"]), type=list[msgspec.Raw])
    assert [bytes(e) for e in events_out[: len(events_in)]] == [bytes(e) for e in events_in]
    assert all(b'"cat":"taxbreak"' in bytes(e) for e in events_out[len(events_in):])


def test_tracks_sit_in_the_process_they_describe_on_named_threads_of_their_own(tmp_path):
    _, _, _, stats, added = _annotate(tmp_path)
    slices = [e for e in added if e.ph == "X"]
    host = {e.pid for e in slices if e.name in HOST_NAMES or e.name.startswith("GPU idle caused")}
    device = {e.pid for e in slices if e.name in (QUEUE_NAME, LATENCY_NAME) or e.name.startswith("GPU idle:")}
    assert host == {100} and device == {0}  # the launching process; the GPU's pid (= device)
    assert all(e.tid >= TID_BASE for e in slices)
    names = sorted((e.pid, e.args["name"]) for e in added if e.ph == "M" and e.name == "thread_name")
    assert names == sorted([(0, "taxbreak GPU idle by cause"), (0, "taxbreak ΔKT launch latency (stream 7)"),
                     (0, "taxbreak queue wait (stream 7)"), (100, "taxbreak GPU idle caused (thread 200)"),
                     (100, "taxbreak ΔCT library (thread 200)"), (100, "taxbreak ΔFT dispatch (thread 200)"),
                     (100, "taxbreak ΔFT python (thread 200)"), (100, "taxbreak ΔKT floor (thread 200)")])
    assert stats.tracks == len(names)


def test_flow_arrows_join_each_launch_to_its_kernel(tmp_path):
    _, _, _, stats, added = _annotate(tmp_path)
    flows = [e for e in added if e.name == "launch → kernel"]
    starts = sorted((e.id, e.pid, e.tid, float(e.us())) for e in flows if e.ph == "s")
    ends = sorted((e.id, e.pid, e.tid, float(e.us()), e.bp) for e in flows if e.ph == "f")
    # the middle of each launch call (100:200) and of its kernel (pid 0 = device, tid 7 = stream)
    assert sorted(s[1:] for s in starts) == [(100, 200, 18.5), (100, 200, 27.5), (100, 200, 82.5)]
    assert sorted(e[1:] for e in ends) == [(0, 7, 32.5, "e"), (0, 7, 42.5, "e"), (0, 7, 104.0, "e")]
    assert [s[0] for s in starts] == [e[0] for e in ends]
    pairs = {s[0]: s[3] for s in starts}
    assert sorted((pairs[e[0]], e[3]) for e in ends) == [(18.5, 32.5), (27.5, 42.5), (82.5, 104.0)]
    assert stats.flows["launch → kernel"] == 3


def test_idle_slices_cover_the_idle_frame_and_point_to_their_cause(tmp_path):
    _, analysis, _, stats, added = _annotate(tmp_path)
    device_idle = [e for e in added if e.ph == "X" and e.name.startswith("GPU idle: ")]
    by_cause: dict[str, Decimal] = {}
    for e in device_idle:
        cause = e.name.removeprefix("GPU idle: ")
        by_cause[cause] = by_cause.get(cause, Decimal(0)) + e.us("dur")
    expected = (analysis.idle["end_ns"] - analysis.idle["start_ns"]).groupby(analysis.idle["cause"].astype(str)).sum()
    assert {c: int(v * 1000) for c, v in by_cause.items()} == {c: int(v) for c, v in expected.items() if v}
    arrows = [e for e in added if e.name == "GPU idle → cause"]
    out = {e.id: e for e in arrows if e.ph == "s"}
    into = {e.id: e for e in arrows if e.ph == "f"}
    assert out.keys() == into.keys() and len(out) == stats.flows["GPU idle → cause"] == 13
    assert {(e.pid, e.tid) for e in into.values()} == {(100, min(e.tid for e in added if e.ph == "X" and
                                                               e.name.startswith("GPU idle caused")))}
    assert all(out[i].us() == into[i].us() for i in out)  # both ends at the middle of one idle piece


def test_max_flows_bounds_the_arrows(tmp_path):
    _, _, _, stats, added = _annotate(tmp_path, max_flows=1)
    assert stats.flows == {"launch → kernel": 1, "GPU idle → cause": 1}
    longest = [e for e in added if e.name == "launch → kernel" and e.ph == "s"]
    assert [float(e.us()) for e in longest] == [82.5]  # K3 has the longest T_launch (19 µs)
    _, _, _, stats, added = _annotate(tmp_path, max_flows=0)
    assert stats.flows == {"launch → kernel": 0, "GPU idle → cause": 0}
    assert not [e for e in added if e.ph in "sf"]


FRAMES = ("kernels", "steps", "phases", "ops", "host_partition", "idle")


def assert_same_analysis(original, again) -> None:
    """Every frame equal, the summary equal but for the input's path and event count; returns
    how many of the annotated trace's events were its own tracks (``event_counts["taxbreak"]``)."""
    import pandas as pd

    for name in FRAMES:
        pd.testing.assert_frame_equal(getattr(again, name), getattr(original, name), check_categorical=False)
    a, b = dict(original.summary), dict(again.summary)
    meta_a, meta_b = dict(a.pop("meta")), dict(b.pop("meta"))
    for key in ("path", "input_events"):
        meta_a.pop(key, None), meta_b.pop(key, None)
    added = meta_b.get("event_counts", {}).pop("taxbreak", 0)
    assert b == a and meta_b == meta_a
    return added


@pytest.mark.parametrize("epoch", [False, True])
def test_planted_annotated_trace_analyses_the_same(tmp_path, epoch):
    trace, analysis, out, _, added = _annotate(tmp_path, epoch=epoch)
    tables = load_trace(out, use_cache=False)
    assert "event.unknown_category" not in tables.diagnostics.as_dict()
    assert tables.counts() == load_trace(trace, use_cache=False).counts()
    again = analyze(out, floor_us=FLOOR_US)
    assert assert_same_analysis(analysis, again) == len(added)  # every added event accounted for
    meta = again.tables.meta
    assert meta.input_events == sum(meta.event_counts.values())


def test_cli_annotate_writes_gzip_and_reports(tmp_path):
    trace = write_planted(tmp_path / "planted.json.gz")
    out = tmp_path / "annotated.json.gz"
    result = CliRunner().invoke(main, ["annotate", str(trace), "-o", str(out), "--floor-us", "4.5",
                                       "--max-flows", "2"])
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith(f"wrote {out}: 3 kernels annotated")
    assert "flow arrows: 2 launch → kernel, 2 GPU idle → cause" in result.stderr
    assert out.read_bytes()[:2] == b"\x1f\x8b"


def test_cpu_only_trace_says_there_is_nothing_to_annotate(shared_traces, tmp_path):
    cpu_only = next((shared_traces / "HolisticTraceAnalysis" / "tests" / "data" / "cpu_only").glob("*.json.gz"))
    out = tmp_path / "annotated.json"
    result = CliRunner().invoke(main, ["annotate", str(cpu_only), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stderr == f"wrote {out}: no kernels in the trace: nothing to annotate " \
                            "(the copy holds the original events only)\n"
    assert load_trace(out).meta.source_format == "kineto"


def test_nsight_input_is_refused_with_a_code(shared_traces, tmp_path):
    mock = shared_traces / "nsys-ai" / "tests" / "fixtures" / "mock.sqlite"
    result = CliRunner().invoke(main, ["annotate", str(mock), "-o", str(tmp_path / "x.json")])
    assert result.exit_code == 1 and result.stderr.startswith("error[format.unknown]")
    assert "not nsys_sqlite" in result.stderr and not (tmp_path / "x.json").exists()
    nsys_analysis = SimpleNamespace(tables=TraceTables(meta=TraceMeta(source_format="nsys", path=str(mock))))
    with pytest.raises(UnsupportedFormatError) as info:
        write_annotated(mock, nsys_analysis, tmp_path / "x.json")
    assert info.value.code == "format.unknown"


def _properly_nested(starts, ends) -> bool:
    for i in range(len(starts)):
        for j in range(len(starts)):
            if i != j and starts[i] < starts[j] < ends[i] < ends[j]:
                return False
    return True


intervals = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 60), st.integers(0, 30)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(intervals)
def test_lanes_hold_only_properly_nested_intervals(rows):
    group = np.array([r[0] for r in rows], dtype=np.int64)
    start = np.array([r[1] for r in rows], dtype=np.int64)
    end = start + np.array([r[2] for r in rows], dtype=np.int64)
    lane = assign_lanes(group, start, end, max_lanes=64)
    assert (lane >= 0).all()  # 40 intervals never need 64 lanes
    for g in np.unique(group):
        for ln in np.unique(lane[group == g]):
            m = (group == g) & (lane == ln)
            assert _properly_nested(start[m], end[m])


def test_nested_subset_keeps_stacks_and_drops_partial_overlaps():
    group = np.zeros(4, dtype=np.int64)
    start = np.array([0, 0, 5, 12])
    end = np.array([20, 10, 8, 25])  # [0,20] ⊃ [0,10] ⊃ [5,8]; [12,25] overlaps [0,20] partially
    assert nested_subset(group, start, end).tolist() == [True, True, True, False]


def test_deep_queues_overflow_into_async_events():
    n = MAX_LANES + 4  # every interval overlaps every other partially: a staircase
    group = np.zeros(n, dtype=np.int64)
    start = np.arange(n, dtype=np.int64)
    lane = assign_lanes(group, start, start + 100)
    assert (lane[:MAX_LANES] == np.arange(MAX_LANES)).all() and (lane[MAX_LANES:] == -1).all()


def test_build_events_writes_deep_queues_as_async_pairs():
    from .fake import make_kernels

    k = make_kernels(n=24)
    k["launch_latency_ns"] = 1_000_000.0  # each kernel's latency slice lasts 1 ms, launches 20 µs apart: 24 deep
    events, stats = build_events(k, shift_ns=0)
    begins = [e for e in events if e["ph"] == "b"]
    ends = {e["id"]: e for e in events if e["ph"] == "e"}
    assert stats.overflow == 24 - MAX_LANES == len(begins) == len(ends)
    for b in begins:
        assert b["pid"] == 0 and b["name"] == LATENCY_NAME and b["tid"] >= TID_BASE
        assert Decimal(bytes(ends[b["id"]]["ts"]).decode()) - Decimal(bytes(b["ts"]).decode()) == 1000
    assert "8 slices beyond 16 lanes written as async events" in stats.summary_line()


def test_real_epoch_trace_keeps_ns_fractions_and_lines_up(shared_traces, tmp_path):
    """HTA's V100 ResNet: absolute-epoch µs with ns fractions (``…131.125``), no baseTimeNanoseconds."""
    trace = shared_traces / "HolisticTraceAnalysis/tests/data/ns_resolution_trace" / \
        "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
    out = tmp_path / "a.json.gz"
    stats = write_annotated(trace, analyze(trace), out)
    events = _events(out)
    kernels = {e.args["correlation"]: e for e in events if e.cat == "kernel"}
    launches = {e.args["correlation"]: e for e in events if e.cat == "cuda_runtime" and "correlation" in e.args}
    floors = [e for e in events if e.cat == CATEGORY and e.name == "ΔKT floor"]
    latency = [e for e in events if e.cat == CATEGORY and e.name == LATENCY_NAME and e.ph == "X"]
    assert stats.kernels > 4000 and floors and latency
    assert any(bytes(e.ts).split(b".")[-1] not in (b"000", b"0") for e in kernels.values())  # ns fractions kept
    assert all(e.us() == launches[e.args["kernel_correlation"]].us() for e in floors)  # exact, to the ns
    assert all(e.us() + e.us("dur") == kernels[e.args["kernel_correlation"]].us() for e in latency)
