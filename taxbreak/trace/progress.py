"""Progress of long library calls, handed to a callback the caller passes in.

Reading and decomposing a 1 M-event trace takes tens of seconds. The library
never prints: ``analyze``, ``load_run`` and ``what_if`` take ``progress=`` (a
callable receiving :class:`ProgressEvent`) and report each stage they enter;
the CLI draws them on stderr (taxbreak/cli/status.py), a notebook may log
them or ignore them (``progress=None``, the default, costs nothing).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional


@dataclass(frozen=True)
class ProgressEvent:
    """One stage entered: ``done`` of ``total`` stages finished before it (``total`` None when unknown)."""

    stage: str
    done: int
    total: Optional[int] = None


ProgressHook = Optional[Callable[[ProgressEvent], None]]

# what taxbreak.decompose.analyze reports, in order (here, so callers need not import the decomposer)
ANALYZE_STAGES = ("reading trace", "finding steps", "linking launches to kernels", "attributing GPU idle",
                  "summarising phases and steps")


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
