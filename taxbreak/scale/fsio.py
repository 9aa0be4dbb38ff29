"""Inputs and outputs through fsspec URLs: local paths, ``file://``, and ``s3://`` / ``gs://``
(or any fsspec protocol) when the user has its package installed (s3fs, gcsfs).

Only this module and :mod:`.dataset` touch fsspec, so local use needs nothing beyond it.
"""
from __future__ import annotations

import hashlib
import io
import uuid

from ..trace.errors import ToolMissingError, TraceNotFoundError

# Blocks read for a content fingerprint: start, middle and end of the file, plus its size.
# Three range reads cost the same for a 1 MB trace and a 10 GB one, local or remote.
FINGERPRINT_BLOCK = 64 * 1024


def url_to_fs(url: str):
    """``(filesystem, path)`` for ``url``; a missing protocol package is a typed error naming it."""
    import fsspec

    try:
        return fsspec.core.url_to_fs(str(url))
    except (ImportError, ValueError) as err:
        protocol = str(url).split("://", 1)[0]
        extra = {"s3": "s3fs", "gs": "gcsfs", "gcs": "gcsfs"}.get(protocol, f"the fsspec package for {protocol}://")
        raise ToolMissingError("engine.missing_extra", f"{protocol}:// needs {extra} ({err})", path=str(url),
                               hint=f"pip install {extra}") from err


def is_local(fs) -> bool:
    """True for the local file system (renames are atomic there)."""
    from fsspec.implementations.local import LocalFileSystem

    return isinstance(fs, LocalFileSystem)


def fingerprint(fs, path: str) -> str:
    """A content fingerprint: BLAKE2b of the size and of 64 KiB at the start, middle and end.

    Cheap at any size (three range reads) and, unlike (size, mtime), it changes when a trace is
    rewritten in place with its mtime restored.
    """
    info = fs.info(path)
    if info.get("type") != "file":
        raise TraceNotFoundError("input.unreadable", "not a file", path=str(path))
    size = int(info.get("size") or 0)
    digest = hashlib.blake2b(str(size).encode(), digest_size=16)
    for start in sorted({0, max(0, size // 2 - FINGERPRINT_BLOCK // 2), max(0, size - FINGERPRINT_BLOCK)}):
        digest.update(fs.read_block(path, start, min(FINGERPRINT_BLOCK, size - start)) if size else b"")
    return f"{size}-{digest.hexdigest()}"


def write_bytes_atomic(fs, path: str, data: bytes) -> None:
    """Write ``data`` so that a reader sees the whole file or none of it.

    Locally: a temporary name beside it (``_tmp-*.partial``: no reader globs it), then a rename.
    On object stores one PUT is already all-or-nothing.
    """
    parent = path.rsplit("/", 1)[0]
    if not is_local(fs):
        fs.pipe_file(path, data)
        return
    fs.makedirs(parent, exist_ok=True)
    tmp = f"{parent}/_tmp-{uuid.uuid4().hex}.partial"
    fs.pipe_file(tmp, data)
    fs.mv(tmp, path)


def parquet_bytes(table) -> bytes:
    """``table`` as the bytes of one Parquet file (zstd)."""
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()
