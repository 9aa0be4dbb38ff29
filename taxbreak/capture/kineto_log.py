"""Keep libkineto's session markers off the user's terminal.

At its default level libkineto writes ``USDT:<time> ... profiler_start`` and
``profiler_stop`` to stderr for every profiler session (its levels: 0 verbose,
1 info, 2 warning, 3 stage, 4 error, 5 USDT markers; the default shows only
level 5). Level 6 drops those two lines and nothing that the default shows
otherwise. Read when a session starts, so setting it before each start works
even after ``import torch``; a value the user set is left alone.
"""
from __future__ import annotations

import os

QUIET_LEVEL = "6"


def quiet_kineto_markers() -> None:
    """Default ``KINETO_LOG_LEVEL`` to 6 for this process unless it is set already."""
    os.environ.setdefault("KINETO_LOG_LEVEL", QUIET_LEVEL)
