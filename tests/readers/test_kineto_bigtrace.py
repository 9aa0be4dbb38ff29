"""The synthetic benchmark trace is a valid, realistic Kineto trace."""
from __future__ import annotations

import numpy as np

from taxbreak.readers import read_kineto
from taxbreak.synth.bigtrace import write_big_kineto


def test_bigtrace_structure(tmp_path):
    stats = write_big_kineto(tmp_path / "big.json.gz", 5000, seed=3, rank=2)
    tables = read_kineto(stats.path)
    assert tables.meta.input_events == stats.events >= 5000
    assert tables.meta.event_counts["dropped"] == 0 and not tables.diagnostics.count("event.wrong_type")
    assert tables.meta.rank == 2 and tables.meta.device_names == ["NVIDIA H100 80GB HBM3"]
    host = tables.host_events.to_pandas()
    annotations = host[host.kind == "annotation"]
    steps = annotations[annotations.name.str.startswith(("taxbreak/prefill/", "taxbreak/decode/"))]
    runs = annotations[annotations.name.str.startswith("taxbreak/run/")]
    assert len(steps) == stats.steps and len(runs) == stats.runs
    assert (runs.depth == 0).all() and (steps.depth == 1).all()
    assert set(host[host.kind == "python"].depth) == {2} and set(host[host.kind == "op"].depth) == {3}
    api = tables.api_calls.to_pandas()
    dev = tables.device_activities.to_pandas()
    assert len(api) == len(dev) == host.kind.eq("op").sum()
    assert set(api.kind) == {"launch", "memcpy"} and set(dev.kind) == {"kernel", "memcpy"}
    launch = api.set_index("correlation").loc[dev.correlation]
    assert (dev.start_ns.to_numpy() >= launch.start_ns.to_numpy() + launch.dur_ns.to_numpy()).all()
    order = np.argsort(dev.start_ns.to_numpy())
    ends = (dev.start_ns + dev.dur_ns).to_numpy()[order]
    assert (dev.start_ns.to_numpy()[order][1:] >= ends[:-1]).all()  # one stream: no overlap
    assert tables.flows.num_rows == 2 * len(api) and tables.ranges.num_rows == stats.steps


def test_bigtrace_is_deterministic(tmp_path):
    a = write_big_kineto(tmp_path / "a.json", 2000, seed=1, gzip=False)
    b = write_big_kineto(tmp_path / "b.json", 2000, seed=1, gzip=False)
    assert a.path.read_bytes() == b.path.read_bytes() and a.json_bytes == a.path.stat().st_size
