"""Progress of long library calls, handed to a callback the caller passes in.

Reading and decomposing a 1 M-event trace takes tens of seconds. The library
never prints: ``analyze``, ``load_run``, ``what_if`` and ``analyze_many`` take ``progress=`` (a
callable receiving :class:`ProgressEvent`) and report each stage they enter;
the CLI draws them on stderr (taxbreak/cli/status.py), a notebook may log
them or ignore them (``progress=None``, the default, costs nothing).
"""
from __future__ import annotations

import contextlib
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Callable, Optional


@dataclass(frozen=True)
class ProgressEvent:
    """One stage entered: ``done`` of ``total`` finished before it (``total`` None when unknown).

    ``unit`` says what is counted: ``stages`` of the call, ``bytes`` of the file being read
    (sent many times while the reader works through a large trace), or ``traces`` finished of a
    folder (``analyze_many``).
    """

    stage: str
    done: int
    total: Optional[int] = None
    unit: str = "stages"


ProgressHook = Optional[Callable[[ProgressEvent], None]]

# what taxbreak.decompose.analyze reports, in order (here, so callers need not import the decomposer)
ANALYZE_STAGES = ("reading trace", "finding steps", "linking launches to kernels", "attributing GPU idle",
                  "summarising phases and steps")


# what a reader reports once its file is read and its tables are being built (the bar stays full)
TABLES_STAGE = "building tables"

# The hook of the call in progress, for the readers below it: threading it through every reader's
# signature would change a dozen functions for one side channel. Set only by ``reporting``.
_HOOK: ContextVar[ProgressHook] = ContextVar("taxbreak_progress", default=None)


@contextlib.contextmanager
def reporting(hook: ProgressHook):
    """Within the block, :func:`report_bytes` goes to ``hook``; None keeps the caller's hook (if any)."""
    if hook is None:
        yield
        return
    token = _HOOK.set(hook)
    try:
        yield
    finally:
        _HOOK.reset(token)


def report_bytes(done: int, total: int, stage: str = "reading trace") -> None:
    """A reader's position in its file, for the hook of the call that asked (if any)."""
    hook = _HOOK.get()
    if hook is not None:
        hook(ProgressEvent(stage, done, total, unit="bytes"))


class Stages:
    """Numbers the stages of one call for its hook: ``stages.enter("linking")`` → (linking, 1, 4)."""

    def __init__(self, hook: ProgressHook, names: tuple[str, ...]) -> None:
        self.hook, self.names, self.done = hook, names, 0

    def enter(self, stage: str) -> None:
        """Report ``stage``; the stages before it count as done."""
        if stage in self.names:
            self.done = self.names.index(stage)
        if self.hook is not None:
            self.hook(ProgressEvent(stage, self.done, len(self.names)))

    def finish(self) -> None:
        """Report that every stage is done (the bar fills)."""
        if self.hook is not None:
            self.hook(ProgressEvent("done", len(self.names), len(self.names)))
