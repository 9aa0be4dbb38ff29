"""The Dask engine (``--engine dask``): one task per trace on a ``distributed`` cluster.

The cluster is, in this order: ``--scheduler-file FILE``, ``--scheduler ADDRESS``,
``$DASK_SCHEDULER_ADDRESS``, else a ``distributed.LocalCluster`` sized like the local engine
(one single-threaded worker process per planned worker). This follows Nsight Systems' recipes
(``--mode dask-futures``). Tasks run :func:`taxbreak.scale.task.run_task`, exactly as the
local engine does, and return only the small :class:`FileResult`; the partitions are written
by the workers, where the output URL says.

A worker that dies is Dask's to handle: the tasks it held are run again elsewhere, and a task
that takes down ``distributed.scheduler.allowed-failures`` + 1 workers (default 3 + 1) fails
with ``KilledWorker``; only that trace is reported (``scale.worker_failed``).
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Callable

from ..readers.kineto_parallel import ENV_WORKERS
from ..trace.errors import ToolMissingError
from .local_engine import died
from .task import FileResult, ManyOptions, TaskSpec, run_task

ENV_SCHEDULER = "DASK_SCHEDULER_ADDRESS"
EXTRA_HINT = "pip install 'taxbreak[dask]'"


def _distributed():
    try:
        import distributed
    except ImportError as err:
        raise ToolMissingError("engine.missing_extra", f"--engine dask needs dask[distributed] ({err})",
                               hint=EXTRA_HINT) from err
    return distributed


@contextmanager
def dask_client(scheduler: str | None = None, scheduler_file: str | None = None, n_workers: int = 1):
    """A connected ``distributed.Client`` (and the LocalCluster it started, closed afterwards)."""
    distributed = _distributed()
    address = scheduler or os.environ.get(ENV_SCHEDULER)
    if scheduler_file or address:
        client = distributed.Client(scheduler_file=scheduler_file) if scheduler_file else distributed.Client(address)
        try:
            yield client
        finally:
            client.close()
        return
    # Workers already use the cores: none forks a parse helper (spawned workers inherit this).
    os.environ.setdefault(ENV_WORKERS, "0")
    with _local_cluster_config(), distributed.LocalCluster(
            n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        yield client


@contextmanager
def _local_cluster_config():
    """Dask settings for the LocalCluster taxbreak starts (docs/scale.md says how to set the
    same on a real cluster; the figures are in docs/performance.md, "Fleets"):

    * the nanny's ``MALLOC_TRIM_THRESHOLD_=65536`` unset (``None``,
      distributed.nanny._get_env_variables): setting it turns off glibc's adaptive mmap
      threshold, so each large numpy/Arrow buffer of the decomposer is mapped and
      page-faulted anew (a 100 k-event trace cost ~40 % more CPU). A nanny that ran earlier
      in this process leaves the value in ``os.environ`` (Dask documents that leak), where
      spawned workers would inherit it: that copy is held back while ours start;
    * the workers' sampling profiler off (``distributed.worker.profile``): it samples the
      task thread every 10 ms and each sample takes the GIL from a Python-bound task
      (40 traces of 100 k events: +16 % with it, level without it). The nannies pass the
      config on to the workers they start.
    """
    import dask

    key = "MALLOC_TRIM_THRESHOLD_"
    dask_default = dask.config.get(f"distributed.nanny.pre-spawn-environ.{key}", default=None)
    leaked = os.environ.get(key) if dask_default is not None and os.environ.get(key) == str(dask_default) else None
    if leaked is not None:
        del os.environ[key]
    try:
        with dask.config.set({f"distributed.nanny.pre-spawn-environ.{key}": None,
                              "distributed.worker.profile.enabled": False}):
            yield
    finally:
        if leaked is not None:
            os.environ[key] = leaked


def run_dask(client, specs: list[TaskSpec], options: ManyOptions,
             on_result: Callable[[FileResult], None]) -> list[FileResult]:
    """Results of every task, in completion order; ``on_result`` sees each as it arrives
    (and raises to stop: the remaining tasks are cancelled)."""
    distributed = _distributed()
    futures = {client.submit(run_task, spec, options, key=f"taxbreak-{spec.input_id or spec.index}-{spec.index}",
                             pure=False): spec for spec in specs}
    results: list[FileResult] = []
    try:
        for fut in distributed.as_completed(list(futures)):
            results.append(_result(fut, futures.pop(fut), distributed))
            # released at once: a worker keeps each result (its trace's summary, every step
            # of it) in memory for as long as the client holds the future
            fut.release()
            on_result(results[-1])
    except BaseException:
        client.cancel(list(futures))
        raise
    return results


def _result(fut, spec: TaskSpec, distributed) -> FileResult:
    try:
        return fut.result()
    except distributed.KilledWorker as err:
        return died(spec, f"worker process died running this trace ({err})",
                    "the trace took down every worker that tried it; lower the workers' load or free memory")
    except Exception as err:  # noqa: BLE001 - a task that could not run (unpicklable result, cancelled)
        return died(spec, f"{type(err).__name__}: {err}", "rerun this file alone with --engine local")
