"""--engine dask on a real distributed.LocalCluster (two worker processes): the same dataset and
combined summary as --engine local, a worker killed mid-run, bad files under skip and fail."""
from __future__ import annotations

import os
import shutil
import signal
import threading
import time

import pyarrow.compute as pc
import pytest
from scale_fakes import fake_analyze, slow_fake_analyze, write_fake_trace

from taxbreak.scale import analyze_many, combine_summaries, find_traces, read_partitioned
from taxbreak.scale.dataset import open_dataset
from taxbreak.synth.bigtrace import write_big_kineto
from taxbreak.trace.errors import TaxbreakError

distributed = pytest.importorskip("distributed")

SHARED = ["HolisticTraceAnalysis/tests/data/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
          "HolisticTraceAnalysis/tests/data/nccl_parser_config/nccl_data.json.gz",
          "HolisticTraceAnalysis/tests/data/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
          "HolisticTraceAnalysis/tests/data/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
          "nsys-ai/tests/fixtures/mock.sqlite"]


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as c:
        yield c


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, shared_traces):
    root = tmp_path_factory.mktemp("fleet")
    job = root / "job"  # generated ranks of one run
    job.mkdir()
    for rank in (0, 1):
        write_big_kineto(job / f"rank{rank}.json.gz", 3000, seed=rank, rank=rank, world_size=2)
    real = root / "real"  # unrelated real traces: runs of their own
    real.mkdir()
    for rel in SHARED:
        shutil.copy(shared_traces / rel, real / rel.rsplit("/", 1)[-1])
    return root


def _tables(out) -> dict:
    """Every table of the dataset, rows sorted, as Python lists (exact comparison)."""
    tables = {}
    for name in ("kernels", "steps", "phases", "idle", "manifest"):
        table = read_partitioned(out, name) if name != "manifest" else _manifest(out)
        keys = [c for c in ("run", "rank", "phase", "input", "step", "start_ns", "correlation", "name")
                if c in table.column_names]
        order = pc.sort_indices(table, sort_keys=[(k, "ascending") for k in keys])
        tables[name] = table.take(order).to_pylist()
    return tables


def _manifest(out):
    import pyarrow.dataset as ds

    from taxbreak.scale.dataset import MANIFEST_PARTITIONS

    return ds.dataset(out / "manifest", format="parquet",
                      partitioning=ds.partitioning(MANIFEST_PARTITIONS, flavor="hive")).to_table()


def _comparable(result) -> dict:
    data = result.to_dict()
    data.pop("engine"), data.pop("workers")
    return data


def test_dask_equals_local_exactly(cluster, fleet, tmp_path):
    inputs = find_traces(fleet)
    local = analyze_many(inputs, workers=2, on_error="skip", use_cache=False, export_dir=tmp_path / "local")
    dask = analyze_many(inputs, on_error="skip", use_cache=False, export_dir=tmp_path / "dask",
                        engine="dask", scheduler=cluster.scheduler_address)
    assert len(local.failed) == 0 and len(local.files) == 7
    assert _comparable(dask) == _comparable(local)
    assert _tables(tmp_path / "dask") == _tables(tmp_path / "local")
    # the generated ranks 0 and 1 (world size 2) are one run; the real traces without a world size
    # above 1 are runs of their own; the two distributed ones (world sizes 2 and 300) share their
    # folder's run and are flagged as not belonging together, and not added up
    assert local.runs["job"]["traces"] == 2
    assert sorted(r for r in local.runs if r.startswith("real.")) == [
        "real.benchmark_result_2869224_1695835535_trace", "real.mock", "real.rank-0.Apr_03_18_51_38.1102"]
    assert local.runs["real"] is None and local.diagnostics.count("scale.world_size_mismatch") == 1
    assert local.not_combined["real"] == "its traces disagree: world sizes 2 and 300"
    assert local.combined is None and "5 runs reported apart" in local.not_combined["all"]
    _check_combined_keys(local)


def _check_combined_keys(result):
    """The newer summary keys combine as docs/scale.md says, from the per-trace summaries."""
    ranks = [f.rank for f in result.files if f.run == "job"]
    job = [f.summary["all"] for f in result.files if f.run == "job"]
    combined = result.runs["job"]["all"]
    causes = job[0]["idle_by_cause_us"]
    # a cause not measured in one trace (library, without library ranges) is not measured combined
    assert combined["idle_by_cause_us"] == {c: _sum_or_none([s["idle_by_cause_us"][c] for s in job]) for c in causes}
    assert combined["wall_us"] == sum(s["wall_us"] for s in job)
    assert combined["device_idle_us"] == sum(s["device_idle_us"] for s in job)
    assert sorted(combined["devices"]) == sorted(f"{r}/{d}" for r, s in zip(ranks, job) for d in s["devices"])
    assert combined["queue_wait_union_us"] is None and combined["queue_wait_p99_us"] is None
    device = sum(s["device_active_us"] for s in job)
    assert combined["hdbi"] == device / (device + sum(s["orchestration_us"] for s in job))
    assert combined["hdbi_reason"] is None
    # the CPU-only real trace has no device time: HDBI over every trace is not measured, and says why
    every = combine_summaries([f.summary for f in result.files if f.is_ok])  # what --combine-runs gives
    assert every["all"]["hdbi"] is None and every["all"]["hdbi_reason"]


def test_a_worker_killed_mid_run_leaves_no_partial_partition(cluster, tmp_path):
    folder = tmp_path / "ranks"
    folder.mkdir()
    for rank in range(8):
        write_fake_trace(folder / f"r{rank}.json", rank, [{"name": "k", "phase": "decode", "step": 0,
                                                           "dur_us": 1.0 + rank}], orchestration_us=2.0)
    client = distributed.Client(cluster)
    pids = list(client.run(os.getpid).values())
    killer = threading.Timer(0.9, os.kill, (pids[0], signal.SIGKILL))
    killer.start()
    out = tmp_path / "out"
    result = analyze_many(find_traces(folder), on_error="skip", analyze_fn=slow_fake_analyze, export_dir=out,
                          engine="dask", scheduler=cluster.scheduler_address)
    killer.join()
    client.close()
    assert not result.failed  # the killed worker's task ran again on the other one
    assert not [p for p in out.rglob("*") if p.name.endswith(".partial")]
    reference = analyze_many(find_traces(folder), workers=1, analyze_fn=fake_analyze, export_dir=tmp_path / "ref")
    assert _tables(out) == _tables(tmp_path / "ref")
    assert _comparable(result) == _comparable(reference)


def test_a_task_dying_between_its_files_is_swept_and_the_rerun_completes(tmp_path, monkeypatch):
    folder = tmp_path / "ranks"
    folder.mkdir()
    for rank in range(3):
        write_fake_trace(folder / f"r{rank}.json", rank, [{"name": "k", "phase": "decode", "step": 0,
                                                           "dur_us": 1.0}], orchestration_us=2.0)
    from taxbreak.scale import dataset as dataset_mod

    real_commit = dataset_mod.commit_task

    def die_before_the_manifest_row(dataset, analysis, row):
        from taxbreak.scale.partition import partition_files, write_files

        write_files(dataset.fs, dataset.root, partition_files(analysis, row["run"], row["rank"], row["input_id"]))
        raise OSError("killed")  # the data files are written, the commit is not

    monkeypatch.setattr(dataset_mod, "commit_task", die_before_the_manifest_row)
    out = tmp_path / "out"
    first = analyze_many(find_traces(folder), workers=1, on_error="skip", analyze_fn=fake_analyze, export_dir=out)
    assert len(first.failed) == 3
    assert not list(out.rglob("part-*.parquet"))  # swept at the end of the run: no partial partition
    monkeypatch.setattr(dataset_mod, "commit_task", real_commit)
    second = analyze_many(find_traces(folder), workers=1, on_error="skip", analyze_fn=fake_analyze, export_dir=out)
    assert not second.failed and read_partitioned(out, "kernels").num_rows == 3


def test_bad_file_among_good_under_skip_and_fail(cluster, tmp_path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    for rank in range(3):
        write_fake_trace(folder / f"r{rank}.json", rank, [], orchestration_us=1.0)
    (folder / "r9.json").write_text('{"rank": ')
    kwargs = dict(analyze_fn=fake_analyze, engine="dask", scheduler=cluster.scheduler_address)
    skipped = analyze_many(find_traces(folder), on_error="skip", **kwargs)
    assert [f.path.rsplit("/", 1)[-1] for f in skipped.failed] == ["r9.json"]
    assert skipped.failed[0].error["code"] == "json.invalid" and skipped.combined["traces"] == 3
    with pytest.raises(TaxbreakError) as info:
        analyze_many(find_traces(folder), on_error="fail", **kwargs)
    assert info.value.code == "json.invalid" and info.value.path.endswith("r9.json")


def test_datasets_of_two_versions_are_never_mixed(tmp_path, monkeypatch):
    out = tmp_path / "out"
    open_dataset(str(out))
    monkeypatch.setattr("taxbreak.scale.dataset.__version__", "9.9.9")
    with pytest.raises(TaxbreakError) as info:
        open_dataset(str(out))
    assert info.value.code == "dataset.version_mismatch"


def test_missing_extra_is_named(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_distributed(name, *args, **kwargs):
        if name == "distributed":
            raise ImportError("No module named 'distributed'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_distributed)
    from taxbreak.scale.dask_engine import dask_client

    with pytest.raises(TaxbreakError) as info, dask_client():
        pass
    assert info.value.code == "engine.missing_extra" and "taxbreak[dask]" in info.value.hint


def _malloc_trim_setting():
    return os.environ.get("MALLOC_TRIM_THRESHOLD_")


def test_the_local_cluster_workers_run_without_the_nannys_malloc_trim_threshold():
    # Dask's default MALLOC_TRIM_THRESHOLD_=65536 turns off glibc's adaptive mmap threshold and
    # made each 100 k-event analysis cost ~40 % more CPU (docs/performance.md, "Fleets").
    import dask

    from taxbreak.scale.dask_engine import dask_client

    assert dask.config.get("distributed.nanny.pre-spawn-environ")["MALLOC_TRIM_THRESHOLD_"] == 65536
    with dask_client(n_workers=1) as client:
        settings = client.run(_malloc_trim_setting)
        assert list(settings.values()) == [None]
    # only for the cluster taxbreak started: the user's configuration is left as it was
    assert dask.config.get("distributed.nanny.pre-spawn-environ")["MALLOC_TRIM_THRESHOLD_"] == 65536


def _profiler_setting():
    import dask

    return dask.config.get("distributed.worker.profile.enabled")


def _held_results(dask_worker):
    return len(dask_worker.data)


def test_the_local_cluster_workers_do_not_sample_their_tasks_and_keep_no_results(tmp_path):
    # the sampling profiler took the GIL from the Python-bound tasks (docs/performance.md,
    # "Fleets"); results held by the client's futures grew the workers' memory with every task
    import dask

    from taxbreak.scale.dask_engine import dask_client, run_dask
    from taxbreak.scale.task import ManyOptions, TaskSpec

    assert dask.config.get("distributed.worker.profile.enabled") is True
    traces = []
    for i in range(3):
        traces.append(tmp_path / f"rank{i}.json.gz")
        write_big_kineto(traces[-1], 2000, seed=i)
    with dask_client(n_workers=1) as client:
        assert list(client.run(_profiler_setting).values()) == [False]
        specs = [TaskSpec(url=str(p), index=i, run_folder="job", siblings=3) for i, p in enumerate(traces)]
        held = []

        def count_held(result):  # while the run goes on: what the worker still keeps
            for _ in range(100):  # a release reaches the worker asynchronously
                now = list(client.run(_held_results).values())[0]
                if now == 0:
                    break
                time.sleep(0.02)
            held.append(now)

        results = run_dask(client, specs, ManyOptions(use_cache=False), count_held)
        assert len(results) == 3 and all(r.error is None for r in results)
        assert held == [0, 0, 0]
    assert dask.config.get("distributed.worker.profile.enabled") is True


def _sum_or_none(values: list):
    return None if any(v is None for v in values) else sum(values)
