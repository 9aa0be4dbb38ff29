"""Host events whose name says what the thread was doing: waiting, or loading data.

Kineto names a Python frame ``<file>(<line>): <function>`` (``threading.py(320): wait``,
``torch/utils/data/dataloader.py(631): __next__``) or, for a C function, ``<built-in method
acquire of _thread.lock object at 0x…>``; ``record_function`` scopes keep their own names
(``enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__``). Each rule is decided once
per distinct name (docs/method.md §7).
"""
from __future__ import annotations

import re

import numpy as np

from .views import name_flags

# A frame that blocks the thread until something else happens: lock and condition waits,
# joins, sleeps, queue gets, select/poll, socket and pipe reads.
BLOCKING_FRAME = re.compile(
    r"(?:^|/)threading\.py\(\d+\): (?:wait|wait_for|_wait_for_tstate_lock|join|acquire)$"
    r"|(?:^|/)queue\.py\(\d+\): get$"
    r"|(?:^|/)selectors\.py\(\d+\): select$"
    r"|(?:^|/)multiprocessing/.*\.py\(\d+\): (?:recv|recv_bytes|_recv|_recv_bytes|poll|_poll|wait|get|join)$"
    r"|(?:^|/)connection\.py\(\d+\): (?:recv|recv_bytes|_recv|_recv_bytes|poll|_poll|wait)$"
    r"|(?:^|/)subprocess\.py\(\d+\): (?:wait|_wait|communicate)$"
    r"|(?:^|/)concurrent/futures/_base\.py\(\d+\): (?:result|wait)$"
    r"|\b(?:Condition|Event|Semaphore|BoundedSemaphore|Barrier)\.wait\b|\btime\.sleep\b"
    r"|^<built-in (?:method|function) (?:acquire|sleep|select|poll|epoll|accept|recv|recv_into|recvfrom"
    r"|recvmsg|wait|waitpid|join)\b"
    r"|\bfutex\b|\bepoll_wait\b")
# Data loading and preprocessing: host work that feeds the model, not model orchestration.
STALL_FRAME = re.compile(
    r"DataLoader|_MultiProcessingDataLoaderIter|_SingleProcessDataLoaderIter"
    r"|(?:^|/)dataloader\.py\(\d+\): (?:__next__|_next_data|_get_data|_try_get_data)$|torch/utils/data/_utils/"
    r"|image_processing|image_transforms|video_processing|feature_extraction|tokeniz"
    r"|(?:^|/)PIL/|\bPIL\.|\bcv2\b|scipy/ndimage|scipy\.ndimage")


def frame_flags(name_codes: np.ndarray, name_cats: np.ndarray, is_op: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per host event: a blocking wait (a frame or annotation, not a dispatcher op), and a
    data-loading or preprocessing frame (any host event)."""
    if len(name_codes) == 0:
        empty = np.zeros(0, dtype=bool)
        return empty, empty
    blocking = name_flags(name_cats, BLOCKING_FRAME)[name_codes] & ~is_op
    stall = name_flags(name_cats, STALL_FRAME)[name_codes]
    return blocking, stall
