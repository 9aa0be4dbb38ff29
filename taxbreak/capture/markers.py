"""Step and phase markers: the naming scheme of docs/architecture.md.

Per recorded run ``r`` an outer range ``taxbreak/run/<r>``; per step a range
``taxbreak/<phase>/<i>`` with ``phase`` in {prefill, decode, mixed} and ``i``
a counter unique within the trace (it keeps increasing across runs). Each
marker is both an NVTX range (seen by Nsight Systems; a no-op without an NVTX
tool attached) and a ``torch.profiler.record_function`` range (Kineto
``user_annotation``, mirrored on the GPU as ``gpu_user_annotation``).

The NVTX range comes from the ``nvtx`` package; where it is not installed, from
``torch.cuda.nvtx`` (CUDA builds of torch carry NVTX), else it is left out (a
CPU build has no NVTX and no Nsight Systems to read it). The names are the same
either way; :data:`NVTX_BACKEND` says which was used and the run manifest
records it.

Usable as context managers or decorators in the user's own code::

    with taxbreak.phase("prefill"):
        logits = model(prompt)

    @taxbreak.phase("decode")
    def decode_one(...): ...
"""
from __future__ import annotations

import contextlib
import importlib
import itertools
import threading

from torch.profiler import record_function

from ..trace.errors import UsageError

PHASES = ("prefill", "decode", "mixed")
PREFIX = "taxbreak"


def _torch_nvtx_range():
    """``torch.cuda.nvtx.range`` where torch was built with NVTX (CUDA builds), else None."""
    try:
        from torch._C import _nvtx  # noqa: F401 - absent from CPU builds, where every call would raise
    except ImportError:
        return None
    from torch.cuda import nvtx as torch_nvtx

    return torch_nvtx.range


def pick_nvtx(import_module=importlib.import_module, torch_range=_torch_nvtx_range):
    """``(backend name, range factory)``: the ``nvtx`` package, ``torch.cuda.nvtx`` or none.

    A missing ``nvtx`` package must not stop a capture (the GPU image lacks it),
    so the ranges fall back to torch's own NVTX binding with the same names.
    """
    try:
        return "nvtx", import_module("nvtx").annotate
    except ImportError:
        pass
    torch_factory = torch_range()
    if torch_factory is not None:
        return "torch.cuda.nvtx", torch_factory
    return "none", lambda name: contextlib.nullcontext()


NVTX_BACKEND, _nvtx_range = pick_nvtx()

_lock = threading.Lock()
_step_counter = itertools.count()
_run_counter = itertools.count()


def reset_counters(step: int = 0, run: int = 0) -> None:
    """Restart step and run numbering (the runner does this per trace)."""
    global _step_counter, _run_counter
    with _lock:
        _step_counter = itertools.count(step)
        _run_counter = itertools.count(run)


def _next(counter_name: str) -> int:
    with _lock:
        return next(globals()[counter_name])


def step_name(phase_name: str, index: int) -> str:
    """``taxbreak/<phase>/<index>``."""
    return f"{PREFIX}/{phase_name}/{index}"


def run_name(index: int) -> str:
    """``taxbreak/run/<index>``."""
    return f"{PREFIX}/run/{index}"


class _Range(contextlib.ContextDecorator):
    """An NVTX range and a record_function range with one name.

    The name is taken on entry (not at construction), so one decorator
    marks every call as a new step with a fresh index.
    """

    def __init__(self, namer) -> None:
        self._namer = namer
        self._local = threading.local()  # one decorator may be entered from several threads

    def _stack(self) -> list[contextlib.ExitStack]:
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        return self._local.stack

    def __enter__(self) -> str:
        name = self._namer()
        stack = contextlib.ExitStack()
        stack.enter_context(_nvtx_range(name))
        stack.enter_context(record_function(name))
        self._stack().append(stack)
        return name

    def __exit__(self, *exc) -> bool:
        self._stack().pop().close()
        return False


def step(phase_name: str = "decode", index: int | None = None) -> _Range:
    """Mark one inference step of ``phase_name`` (prefill, decode or mixed).

    Args:
        phase_name: the step's phase.
        index: a fixed step index; by default the next value of a counter
            shared by every marker, so indices are unique within a trace.

    Returns:
        A context manager / decorator; ``with`` yields the range name.

    Raises:
        UsageError: ``usage.invalid`` for a phase outside :data:`PHASES`.
    """
    if phase_name not in PHASES:
        raise UsageError("usage.invalid", f"unknown phase {phase_name!r}",
                         hint="use one of: " + ", ".join(PHASES))
    if index is not None:
        return _Range(lambda: step_name(phase_name, index))
    return _Range(lambda: step_name(phase_name, _next("_step_counter")))


def phase(name: str) -> _Range:
    """Mark one step of phase ``name``; same as ``step(name)``."""
    return step(name)


def run(index: int | None = None) -> _Range:
    """Mark one recorded run (prefill plus its decode steps): ``taxbreak/run/<r>``."""
    if index is not None:
        return _Range(lambda: run_name(index))
    return _Range(lambda: run_name(_next("_run_counter")))
