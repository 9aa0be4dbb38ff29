"""Starting the torch profiler, with libkineto's session markers kept off the user's terminal.

At its default level libkineto writes ``USDT:<time> ... profiler_start`` and
``profiler_stop`` to stderr for every profiler session (its levels: 0 verbose,
1 info, 2 warning, 3 stage, 4 error, 5 USDT markers; the default shows only
level 5). Level 6 drops those two lines and nothing that the default shows
otherwise. Read when a session starts, so setting it before each start works
even after ``import torch``; a value the user set is left alone.
"""
from __future__ import annotations

import os
from contextlib import AbstractContextManager
from dataclasses import dataclass

QUIET_LEVEL = "6"


def quiet_kineto_markers() -> None:
    """Default ``KINETO_LOG_LEVEL`` to 6 for this process unless it is set already."""
    os.environ.setdefault("KINETO_LOG_LEVEL", QUIET_LEVEL)


@dataclass
class ProfilerSession:
    """A ``torch.profiler.profile`` not yet entered, and the activities it records."""

    activities: list
    profile: AbstractContextManager

    @property
    def activity_names(self) -> list[str]:
        return [a.name for a in self.activities]


def profiler_session(device: str, **options) -> ProfilerSession:
    """The one way captures start the torch profiler (profile, mixed, replay, floor).

    CPU activity always, CUDA activity when ``device`` is a CUDA device, and
    libkineto's session markers kept off stderr. ``options`` go to
    ``torch.profiler.profile`` (``record_shapes``, ``with_stack``).
    """
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if str(device).startswith("cuda") else [])
    quiet_kineto_markers()
    return ProfilerSession(activities, profile(activities=activities, **options))
