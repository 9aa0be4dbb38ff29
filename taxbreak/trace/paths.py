"""Where taxbreak keeps per-user state (floor results, parse cache)."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

from .errors import TraceFormatError, TraceNotFoundError, UnsupportedFormatError
from .fileio import read_input_bytes


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


MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 16 << 20  # a manifest is a few KB; the bound stops a link to a huge file or a device


def read_run_manifest(run_dir: Path) -> dict | None:
    """The run directory's ``manifest.json`` as a dict, None when there is none.

    Checked before it is opened (a FIFO or device is refused unread, ``input.unreadable``).

    Raises:
        TraceNotFoundError: ``input.unreadable``, ``input.too_large``.
        TraceFormatError: ``run.not_a_run`` for a manifest that is not a JSON object.
    """
    file = Path(run_dir) / MANIFEST
    if not os.path.lexists(file):
        return None
    data = read_input_bytes(file, max_bytes=MAX_MANIFEST_BYTES, what="manifest")
    try:
        manifest = json.loads(data)
    except RecursionError:  # json's decoder recurses once per level: a deep manifest is hostile
        raise TraceFormatError("json.too_deep", "manifest.json nested too deeply", path=str(file),
                               hint="a run manifest is a flat JSON object; re-run `taxbreak profile`") from None
    except ValueError as err:  # JSONDecodeError and UnicodeDecodeError
        raise TraceFormatError("run.not_a_run", f"manifest.json cannot be read: {err}", path=str(file),
                               hint="re-run `taxbreak profile` or remove the broken manifest") from err
    if not isinstance(manifest, dict):
        raise TraceFormatError("run.not_a_run", "manifest.json is not a JSON object", path=str(file))
    return manifest


def require_run_manifest(run_dir: Path) -> dict:
    """:func:`read_run_manifest` for a folder that must be a run directory.

    Raises:
        TraceNotFoundError: ``run.not_a_run`` without a manifest; the errors of :func:`read_run_manifest`.
    """
    manifest = read_run_manifest(run_dir)
    if manifest is None:
        raise TraceNotFoundError("run.not_a_run", "directory without manifest.json", path=str(run_dir),
                                 hint="give a run directory written by `taxbreak profile`, or a trace file")
    return manifest


def run_trace_file(run_dir: Path, names: tuple[str, ...], manifest: dict | None = None) -> Path | None:
    """The trace of a run directory: the file its manifest names (``"trace"``, e.g. the
    ``<worker>.<time_ns>.pt.trace.json.gz`` that ``trace_handler`` writes), else the first of
    ``names`` present; None when neither is there.

    The named file is confined to the run directory: a bare file name whose real path
    lies inside it. A manifest naming ``/etc/passwd``, ``../other`` or a link leading out
    would make every report of the folder show another file (``run.not_a_run``).
    """
    named = manifest.get("trace") if isinstance(manifest, dict) else None
    if named is not None:
        trace = confined_file(Path(run_dir), named)
        if trace is not None:
            return trace
    return next((Path(run_dir) / name for name in names if (Path(run_dir) / name).is_file()), None)


def confined_file(run_dir: Path, name: object) -> Path | None:
    """``run_dir / name`` when it is a file inside ``run_dir``, None when it is absent.

    Raises:
        UnsupportedFormatError: ``run.not_a_run`` when ``name`` leads out of the folder.
    """
    inside = isinstance(name, str) and name not in ("", ".", "..") and Path(name).name == name
    path = run_dir / name if inside else None
    if inside and os.path.lexists(path):
        real_dir = os.path.realpath(run_dir)
        inside = os.path.commonpath([real_dir, os.path.realpath(path)]) == real_dir
    if not inside:
        raise UnsupportedFormatError("run.not_a_run", f"the manifest names a trace outside its run folder: "
                                     f"{name!r}", path=str(run_dir / MANIFEST),
                                     hint="a run manifest's \"trace\" is a file name inside the run folder")
    return path if path.is_file() else None
