"""Device busy time split by kind of work: kernels, copies (memcpy) and memsets.

Per device and kind, the union of that kind's intervals, cut at step boundaries
like the idle pieces (a piece belongs to the step its start falls in), so per
device and scope the kernel part sits beside ``busy_us`` (window − idle) on the
same clock. The three kinds can overlap each other (a copy engine runs beside
the SMs): each is a union of its own intervals, not a share of ``busy_us``,
and kernel + copy + memset busy can exceed it (docs/method.md §3.1).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .idle import cut_by_steps
from .intervals import merged_by_group
from .steps import Steps
from .views import Device

BUSY_KINDS = ("kernel", "memcpy", "memset")
BUSY_KIND_KEYS = ("device_kernel_busy_us", "device_copy_busy_us", "device_memset_busy_us")


@dataclass
class BusyPieces:
    """Disjoint busy pieces per (device, kind), cut at step boundaries."""

    device_pos: np.ndarray  # position of the piece's device in Context.devices; len(devices): all merged
    kind: np.ndarray  # position in BUSY_KINDS
    step: np.ndarray
    dur_ns: np.ndarray


def busy_pieces(dev: Device, devices: tuple, steps: Steps) -> BusyPieces:
    """The :class:`BusyPieces` of the device view's rows (kinds outside BUSY_KINDS ignored)."""
    device, start_ns, end_ns = dev.device, dev.start_ns, dev.end_ns
    # decided once per distinct kind, spread by the dictionary codes
    pos_of_cat = np.array([BUSY_KINDS.index(c) if c in BUSY_KINDS else -1 for c in dev.kind_cats], np.int64)
    kind_pos = pos_of_cat[dev.kind_codes] if len(dev.kind_codes) else np.zeros(0, np.int64)
    dev_pos = np.searchsorted(np.asarray(devices, np.int64), np.asarray(device, np.int64))
    # every row twice: on its own device, and on the pseudo-device len(devices) where all devices merge
    # (the scope keys are unions over all devices, as device_busy_us is)
    both = np.concatenate([dev_pos, np.full(len(dev_pos), len(devices), np.int64)])
    kind2 = np.concatenate([kind_pos, kind_pos])
    cell = np.where(kind2 >= 0, both * len(BUSY_KINDS) + kind2, -1)
    m_cell, m_start, m_end = merged_by_group(cell, np.concatenate([start_ns, start_ns]),
                                             np.concatenate([end_ns, end_ns]))
    src, piece_start, piece_end, step = cut_by_steps(m_start, m_end, steps)
    m_cell = m_cell[src]
    return BusyPieces(m_cell // len(BUSY_KINDS), m_cell % len(BUSY_KINDS), step, piece_end - piece_start)
