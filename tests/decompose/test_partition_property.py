"""The host partition conserves wall time exactly, whatever the events look like
(random, overlapping, unnested, several threads, zero-length, with or without steps)."""
from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from taxbreak.decompose import analyze
from taxbreak.decompose.partition import COLUMNS
from taxbreak.synth.planted import arrow_table
from taxbreak.trace.schema import SCHEMAS
from taxbreak.trace.tables import TraceMeta, TraceTables

HOST_KINDS = ["python", "op", "annotation"]
API_KINDS = ["launch", "sync", "other", "memcpy", "library"]


def _tables(rng: np.random.Generator, n_host: int, n_api: int, threads: int, steps: bool) -> TraceTables:
    def times(n):
        start = rng.integers(0, 50_000, n)
        return start, rng.integers(0, 8_000, n)

    hs, hd = times(n_host)
    names = [("aten::mm" if k == "op" and rng.random() < 0.6 else f"f{i}") for i, k in
             enumerate(rng.choice(HOST_KINDS, n_host))]
    kinds = [("op" if n.startswith("aten") else rng.choice(HOST_KINDS)) for n in names]
    if steps and n_host:
        kinds[0], names[0] = "annotation", "taxbreak/decode/0"
    host = pd.DataFrame({"row_id": np.arange(n_host), "pid": 1, "tid": rng.integers(0, threads, n_host),
                         "kind": kinds, "name": names, "start_ns": hs, "dur_ns": hd, "depth": 0, "parent": -1,
                         "external_id": -1, "python_id": -1, "python_parent_id": -1, "sequence_nr": -1,
                         "input_dims": None, "input_types": None, "input_strides": None, "concrete_inputs": None})
    as_, ad = times(n_api)
    akind = rng.choice(API_KINDS, n_api)
    api = pd.DataFrame({"row_id": n_host + np.arange(n_api), "process": 1, "pid": 1,
                        "tid": rng.integers(0, threads, n_api),
                        "domain": np.where(akind == "library", "cublas", "cuda_runtime"), "kind": akind,
                        "name": [f"cuda{k}" for k in akind], "api_name": [f"cuda{k}" for k in akind],
                        "start_ns": as_, "dur_ns": ad, "correlation": np.arange(n_api), "external_id": -1,
                        "cbid": -1})
    return TraceTables(host_events=arrow_table(host, "host_events"), api_calls=arrow_table(api, "api_calls"),
                       device_activities=SCHEMAS["device_activities"].empty_table(), meta=TraceMeta())


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_host=st.integers(0, 40), n_api=st.integers(0, 40),
       threads=st.integers(1, 3), steps=st.booleans())
def test_partition_conserves_wall_time(seed, n_host, n_api, threads, steps):
    tables = _tables(np.random.default_rng(seed), n_host, n_api, threads, steps)
    part = analyze(tables).host_partition
    parts = part[list(COLUMNS.values())].sum(axis=1)
    assert (parts == part["host_thread_ns"]).all()
    assert (part[list(COLUMNS.values())] >= 0).all().all()
    ev = pd.concat([t.to_pandas()[["tid", "start_ns", "dur_ns"]] for t in (tables.host_events, tables.api_calls)])
    if len(ev) == 0:
        assert len(part) == 0
        return
    ev["end"] = ev["start_ns"] + ev["dur_ns"]
    span = ev.groupby("tid")["end"].max() - ev.groupby("tid")["start_ns"].min()
    wall = part.groupby("tid")["host_thread_ns"].sum()
    assert (wall.reindex(span.index).fillna(0) == span).all()
    assert (part["exposed_orchestration_ns"] + part["hidden_orchestration_ns"] <= part["host_thread_ns"]).all()
