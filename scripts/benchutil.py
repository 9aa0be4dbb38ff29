"""Shared by the benchmark scripts: run a child and take its own peak RSS, describe the machine,
write a synthetic trace and time it."""
from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

# No taxbreak import at module level: a child started by vfork takes the parent's peak RSS as
# its own starting peak (exec folds the parent's high-water mark into ru_maxrss), so the
# measuring process must stay small.


def run_child(cmd: list[str], env: dict | None = None, stdout=subprocess.PIPE) -> dict:
    """Run ``cmd`` to completion: wall time (s), its ``rusage`` and exit code, stdout and stderr.

    ``os.wait4`` gives this child's own usage (with the descendants it waited for, such as the
    parse helper), where ``RUSAGE_CHILDREN``'s peak would be the largest of all children so far.
    The pipes are drained in threads meanwhile (a full pipe would block the child).
    """
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=stdout, stderr=subprocess.PIPE)
    out: dict[str, bytes] = {}
    drains = [threading.Thread(target=lambda n=name, p=pipe: out.__setitem__(n, p.read()))
              for name, pipe in (("stdout", proc.stdout), ("stderr", proc.stderr)) if pipe is not None]
    for drain in drains:
        drain.start()
    _, status, usage = os.wait4(proc.pid, 0)
    for drain in drains:
        drain.join()
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
    return {"wall_s": time.perf_counter() - start, "usage": usage, "rc": proc.returncode,
            "stdout": out.get("stdout", b""), "stderr": out.get("stderr", b"")}


def machine_line() -> str:
    from taxbreak.capture.hostinfo import cpu_model

    return f"{os.cpu_count()} cores, {cpu_model() or 'unknown CPU'}"


def timed_trace(path: Path, n_events: int, gzip: bool):
    """Write a ``write_big_kineto`` trace; its stats and the seconds it took."""
    from taxbreak.synth.bigtrace import write_big_kineto

    t0 = time.perf_counter()
    stats = write_big_kineto(path, n_events, gzip=gzip)
    return stats, time.perf_counter() - t0
