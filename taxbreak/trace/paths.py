"""Where taxbreak keeps per-user state (floor results, parse cache)."""
from __future__ import annotations

import json
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


def run_trace_file(run_dir: Path, names: tuple[str, ...]) -> Path | None:
    """The trace of a run directory: the file its ``manifest.json`` names (``"trace"``, e.g. the
    ``<worker>.<time_ns>.pt.trace.json.gz`` that ``trace_handler`` writes), else the first of
    ``names`` present; None when neither is there. A manifest that cannot be read names nothing
    here (the caller that reads it reports it)."""
    try:
        named = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8")).get("trace")
    except (OSError, ValueError, AttributeError):
        named = None
    if isinstance(named, str) and named and Path(named).name == named and (run_dir / named).is_file():
        return run_dir / named
    return next((run_dir / name for name in names if (run_dir / name).is_file()), None)
