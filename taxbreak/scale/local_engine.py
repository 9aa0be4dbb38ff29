"""The local engine: one process pool on this machine (``--engine local``, the default).

A worker that dies (out of memory, a signal, a crash in native code) breaks a
``ProcessPoolExecutor`` and fails every queued future with it, so the pool cannot say
which trace killed it. After a break, the traces left unfinished are run again, each in a
process of its own (as many at once as there were workers): the one that dies again is the
only one blamed (``scale.worker_failed``), the innocent ones are analyzed.
"""
from __future__ import annotations

import os
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from typing import Callable

from ..readers.kineto_parallel import ENV_WORKERS
from .task import FileResult, ManyOptions, TaskSpec, run_task
from .workers import die_with_parent

OnResult = Callable[[FileResult], None]  # raises to stop the run (on_error="fail")


def run_local(specs: list[TaskSpec], options: ManyOptions, n_workers: int, on_result: OnResult) -> list[FileResult]:
    """Results of every task, in completion order; ``on_result`` sees each as it arrives."""
    if n_workers == 1:  # no pool: no process start-up, and tracebacks stay simple
        results = []
        for spec in specs:
            results.append(run_task(spec, options))
            on_result(results[-1])
        return results
    done, unfinished = _pool_round(specs, options, n_workers, on_result)
    if unfinished:
        done += _isolated_rounds(unfinished, options, n_workers, on_result)
    return done


def _pool(n_workers: int) -> ProcessPoolExecutor:
    # spawn, not fork: a forked child of a process that already ran Arrow's thread pool can deadlock.
    return ProcessPoolExecutor(max_workers=n_workers, mp_context=get_context("spawn"),
                               initializer=_worker_start, initargs=(os.getpid(),))


def _worker_start(parent_pid: int) -> None:
    """A worker dies with the process that started it (SIGTERM or SIGKILL to ``analyze DIR`` left
    two workers, 320 MB, and the resource tracker running for minutes), and none forks a parse
    helper of its own: the pool's workers already use the cores (kineto_parallel)."""
    die_with_parent(parent_pid)
    os.environ[ENV_WORKERS] = "0"


def _pool_round(specs, options, n_workers, on_result) -> tuple[list[FileResult], list[TaskSpec]]:
    """Run every spec in one pool; returns the results and the specs a broken pool left unfinished."""
    pool = _pool(n_workers)
    pending: dict[Future, TaskSpec] = {pool.submit(run_task, s, options): s for s in specs}
    results: list[FileResult] = []
    broken: list[TaskSpec] = []
    try:
        while pending:  # a broken pool fails every pending future at once: this ends
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                spec = pending.pop(fut)
                try:
                    results.append(fut.result())
                except BrokenProcessPool:
                    broken.append(spec)
                    continue
                on_result(results[-1])
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return results, broken


def _isolated_rounds(specs, options, n_workers, on_result) -> list[FileResult]:
    """Each spec in a one-task pool of its own, ``n_workers`` at a time: a death blames one trace."""
    results: list[FileResult] = []
    queue = sorted(specs, key=lambda s: s.index)
    running: dict[Future, tuple[TaskSpec, ProcessPoolExecutor]] = {}
    try:
        while queue or running:
            while queue and len(running) < n_workers:
                spec, pool = queue.pop(0), _pool(1)
                running[pool.submit(run_task, spec, options)] = (spec, pool)
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished:
                spec, pool = running.pop(fut)
                pool.shutdown(wait=False)
                results.append(_result_or_death(fut, spec))
                on_result(results[-1])
    finally:
        for _, pool in running.values():
            pool.shutdown(wait=False, cancel_futures=True)
    return results


def _result_or_death(fut: Future, spec: TaskSpec) -> FileResult:
    try:
        return fut.result()
    except BrokenProcessPool as err:  # this trace's own process died: it alone is to blame
        return died(spec, f"worker process died ({err})", "lower --workers or free memory")


def died(spec: TaskSpec, message: str, hint: str) -> FileResult:
    """The result of a trace whose worker process died while analyzing it."""
    failed = FileResult(path=spec.url, index=spec.index, input_id=spec.input_id)
    failed.error = {"code": "scale.worker_failed", "message": message, "hint": hint,
                    "location": None, "type": "TaxbreakError"}
    return failed
