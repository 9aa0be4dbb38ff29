"""Run one fuzz case in a forked child with a time and memory bound, and classify it.

The parent writes the case's bytes to a file, forks, and the child (address
space capped with ``RLIMIT_AS``) reads it with ``load_trace`` and analyzes it,
reporting back through a pipe. Outcomes:

* ``ok`` — tables and an analysis; ``typed`` — a taxbreak error with a registered code;
* failures: ``crash`` (the child died of a signal), ``hang`` (past the timeout,
  killed), ``memory`` (MemoryError under the cap), ``traceback`` (any other
  exception), ``invariant`` (tables whose event accounting does not add up).

A failure's signature (kind, exception type, the innermost taxbreak frame) makes
it unique; the same bug found from many inputs counts once.
"""
from __future__ import annotations

import faulthandler
import json
import os
import resource
import select
import signal
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

FAILURES = ("crash", "hang", "memory", "traceback", "invariant")


@dataclass
class Outcome:
    kind: str  # ok | typed | crash | hang | memory | traceback | invariant
    detail: str = ""  # error code, exception, signal name
    where: str = ""  # innermost taxbreak frame (file:line) of a traceback
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.kind in FAILURES

    @property
    def signature(self) -> str:
        return f"{self.kind}:{self.detail.split(':')[0]}:{self.where}"


def preload() -> None:
    """Import the readers and the decomposer once in the parent: every fork starts warm."""
    import taxbreak.decompose  # noqa: F401
    import taxbreak.readers  # noqa: F401


def run_case(path: Path, timeout_s: float = 20.0, memory_bytes: int = 2 * 1024**3, target=None) -> Outcome:
    """Read and analyze ``path`` in a forked child; never raises for the case's sake.

    ``target(path) -> dict`` replaces the read-and-analyze step (the harness's own tests)."""
    read_fd, write_fd = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_fd)
        _child(path, write_fd, memory_bytes, target or classify)
    os.close(write_fd)
    report, status = _wait(pid, read_fd, timeout_s)
    os.close(read_fd)
    seconds = time.monotonic() - started
    if status is None:
        return Outcome("hang", f"no result after {timeout_s:g} s", seconds=seconds)
    if os.WIFSIGNALED(status):
        return Outcome("crash", signal.Signals(os.WTERMSIG(status)).name, seconds=seconds)
    if not report:
        return Outcome("crash", f"exit status {os.WEXITSTATUS(status)} without a report", seconds=seconds)
    data = json.loads(report)
    return Outcome(data["kind"], data.get("detail", ""), data.get("where", ""), seconds, data.get("extra", {}))


def _wait(pid: int, fd: int, timeout_s: float) -> tuple[bytes, int | None]:
    """The child's report and wait status; status None when it was killed for the timeout."""
    chunks, deadline = [], time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return b"", None
        ready, _, _ = select.select([fd], [], [], min(left, 0.5))
        if ready:
            chunk = os.read(fd, 65536)
            if chunk:
                chunks.append(chunk)
                continue
            _, status = os.waitpid(pid, 0)  # pipe closed: the child has finished
            return b"".join(chunks), status


def _child(path: Path, fd: int, memory_bytes: int, target) -> None:
    """Never returns: reports one JSON line and exits."""
    faulthandler.disable()  # a crash is the parent's to report (pytest turns the dump on)
    try:
        cap = _vm_size() + memory_bytes
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        report = target(path)
    except BaseException as exc:  # noqa: BLE001 - the harness itself must report, not die
        report = {"kind": "traceback", "detail": f"harness: {type(exc).__name__}: {exc}"}
    try:
        os.write(fd, json.dumps(report).encode())
    finally:
        os._exit(0)


def classify(path: Path) -> dict:
    """Read and analyze ``path``; the outcome as a dict (kind, detail, where)."""
    from taxbreak.decompose import analyze
    from taxbreak.readers import load_trace
    from taxbreak.trace.errors import ERROR_CODES, TaxbreakError

    try:
        tables = load_trace(path, use_cache=False)
        counts = tables.meta.event_counts
        if counts and sum(counts.values()) != tables.meta.input_events:
            return {"kind": "invariant", "detail": f"event_counts {sum(counts.values())} != "
                    f"input_events {tables.meta.input_events}"}
        analyze(tables).to_json()
    except TaxbreakError as exc:
        if exc.code not in ERROR_CODES:
            return {"kind": "traceback", "detail": f"unregistered code {exc.code}"}
        return {"kind": "typed", "detail": exc.code}
    except MemoryError:
        return {"kind": "memory", "detail": "MemoryError", "where": _where()}
    except RecursionError:
        return {"kind": "traceback", "detail": "RecursionError", "where": _where()}
    except Exception as exc:  # noqa: BLE001 - exactly what the fuzzer looks for
        return {"kind": "traceback", "detail": f"{type(exc).__name__}: {str(exc)[:200]}", "where": _where()}
    return {"kind": "ok", "extra": {"events": tables.meta.input_events}}


def _where() -> str:
    """file:line of the innermost frame inside the taxbreak package."""
    frames = traceback.extract_tb(__import__("sys").exc_info()[2])
    ours = [f for f in frames if "/taxbreak/" in f.filename]
    frame = (ours or frames or [None])[-1]
    if frame is None:
        return ""
    return f"{'/'.join(Path(frame.filename).parts[-2:])}:{frame.lineno}"


def _vm_size() -> int:
    """This process's virtual size in bytes (the cap is set above it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0
