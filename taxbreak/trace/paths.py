"""Where taxbreak keeps per-user state (floor results, parse cache)."""
from __future__ import annotations

import os
import re
from pathlib import Path


def cache_dir() -> Path:
    """``$TAXBREAK_CACHE_DIR``, else ``$XDG_CACHE_HOME/taxbreak``, else ``~/.cache/taxbreak``."""
    explicit = os.environ.get("TAXBREAK_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "taxbreak"


def slug(text: str) -> str:
    """A file-name-safe form of a GPU name or version string."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "unknown"


def floor_cache_path(gpu_name: str, driver_version: str) -> Path:
    """The cached null-kernel floor of one GPU model under one driver."""
    return cache_dir() / "floor" / f"{slug(gpu_name)}__{slug(driver_version)}.json"
