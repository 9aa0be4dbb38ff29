"""T_sys, the null-kernel launch floor, and where its value came from.

Resolution order (docs/architecture.md, "Null-kernel floor"):

1. ``floor_us`` given by the caller (``--floor-us``) — source ``given``;
2. a cached measurement for the trace's GPU written by ``taxbreak floor``
   (``trace.paths.floor_cache_path``; the trace's driver version first, else the
   newest measurement of that GPU model) — source ``measured``;
3. the published mean for that GPU (TaxBreak, H100 4.71 µs, H200 4.50 µs) —
   source ``published:H100`` / ``published:H200``;
4. the generic published default 4.50 µs — source ``published:default``.

A trace without device activity has no launch path: ``unavailable`` (None).
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from ..trace.paths import cache_dir, floor_cache_path, slug
from ..trace.tables import TraceTables

log = logging.getLogger(__name__)

PUBLISHED_FLOOR_US = {"H100": 4.71, "H200": 4.50}
DEFAULT_FLOOR_US = 4.50


@dataclass(frozen=True)
class Floor:
    """A resolved T_sys: ``floor_ns`` (None when unavailable) and its ``source``."""

    floor_ns: int | None
    source: str
    gpu_name: str = ""

    @property
    def floor_us(self) -> float | None:
        return None if self.floor_ns is None else self.floor_ns / 1000.0


def resolve_floor(tables: TraceTables, floor_us: float | None = None, gpu_name: str | None = None) -> Floor:
    """Pick T_sys for ``tables`` (see module docstring for the order).

    Args:
        tables: the trace; its device names and driver version select the cached/published value.
        floor_us: an explicit floor in µs (source ``given``).
        gpu_name: GPU name to use when the trace names none (e.g. from the run manifest).
    """
    gpu = _gpu_name(tables) or (gpu_name or "")
    if tables.device_activities.num_rows == 0:
        return Floor(None, "unavailable", gpu)
    if floor_us is not None:
        return Floor(_to_ns(floor_us), "given", gpu)
    cached = _cached_floor_us(gpu, _driver_version(tables))
    if cached is not None:
        return Floor(_to_ns(cached), "measured", gpu)
    for model, value in PUBLISHED_FLOOR_US.items():
        if model in gpu.upper():
            return Floor(_to_ns(value), f"published:{model}", gpu)
    return Floor(_to_ns(DEFAULT_FLOOR_US), "published:default", gpu)


def _to_ns(value_us: float) -> int:
    return int(round(float(value_us) * 1000.0))


def _gpu_name(tables: TraceTables) -> str:
    names = tables.meta.device_names
    return names[0] if names else ""


def _driver_version(tables: TraceTables) -> str:
    extra = tables.meta.extra or {}
    for key in ("cuda_driver_version", "driver_version"):
        if extra.get(key) not in (None, ""):
            return str(extra[key])
    return ""


def _cached_floor_us(gpu_name: str, driver_version: str) -> float | None:
    """Mean floor of a cached measurement for this GPU (this driver's if cached, else the newest)."""
    if not gpu_name:
        return None
    folder = cache_dir() / "floor"
    # this driver's measurement first, then the newest one for the same GPU model
    candidates = [floor_cache_path(gpu_name, driver_version)] if driver_version else []
    candidates += sorted(folder.glob(f"{slug(gpu_name)}__*.json"), key=_mtime, reverse=True)
    for path in candidates:
        value = _read_floor(path)
        if value is not None:
            return value
    return None


def _mtime(path: Path) -> float:
    return path.stat().st_mtime


_MAX_FLOOR_FILE_BYTES = 64 * 1024  # a floor record is a few hundred bytes: anything larger is not one


def _read_floor(path: Path) -> float | None:
    try:
        if path.stat().st_size > _MAX_FLOOR_FILE_BYTES or not path.is_file():
            raise ValueError("not a floor record")  # never read a huge file or a FIFO into memory
        value = json.loads(path.read_text()).get("floor_us")
    except (OSError, ValueError, AttributeError, RecursionError):
        # a missing, unreadable, oversized or deeply nested cache entry falls through to the published value
        log.debug("floor cache entry %s not usable", path)
        return None
    return float(value) if isinstance(value, (int, float)) and value > 0 else None
