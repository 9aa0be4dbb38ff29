"""Parse cache: the `TraceTables` of a trace, kept as Arrow IPC files (LZ4) between runs.

Parsing a 1 M-event Kineto trace costs seconds; reading its tables back costs
0.06 s of CPU (docs/performance.md, "Cache writes"). An entry is
keyed by everything that can change the parse result:

    sha256(absolute path, size, mtime_ns, ctime_ns, content fingerprint, taxbreak.__version__,
           READER_FORMAT_VERSION, variant)

so an edited, replaced or touched trace, a new taxbreak release or a reader
change (bump :data:`READER_FORMAT_VERSION`) all miss. The content fingerprint
(:func:`content_fingerprint`) catches a trace rewritten in place with its size
and mtime restored (``touch -r``); docs/reliability.md, "Cache", gives its cost. ``variant`` carries
parse options that change the tables (``allow_truncated``).

Layout, under ``taxbreak.trace.paths.cache_dir() / "parse"``::

    <key>/host_events.arrow ... trace_meta.json     (trace.tables.write_arrow)
    <key>/.taxbreak-cache                             written first: marks the folder as taxbreak's
    <key>/entry.json                                 written last: marks the entry complete (lists the files)

Writers build an entry in a private temporary folder and ``rename`` it into
place, so concurrent writers of one trace never leave a half-written entry
(the loser's rename fails and its copy is removed). An entry that cannot be
read is removed, the trace is parsed again and the rebuilt tables carry the
``cache.corrupt_entry`` diagnostic. The cache is capped at
``$TAXBREAK_CACHE_MAX_BYTES`` (default 5 GiB); the least recently used entries
go first. :func:`clear_cache` empties it (``taxbreak cache clear``), and
``$TAXBREAK_NO_CACHE=1`` turns it off for a whole process tree. Clearing and
pruning touch only folders that carry the marker file, and in an entry only the
files its ``entry.json`` lists: folders, files and ``.tmp-*`` folders of
anything else under the cache directory are left alone.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import shutil
import stat
import threading
import time
import uuid
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable, Iterator

from .. import __version__
from ..trace.paths import cache_dir
from ..trace.schema import TABLE_NAMES
from ..trace.tables import TraceTables, write_arrow

log = logging.getLogger(__name__)
_PACKAGE = Path(__file__).resolve().parents[1]

_PENDING: dict[str, threading.Thread] = {}  # background writes of this process, by key
_PENDING_LOCK = threading.Lock()
_HELD: list[threading.Thread] | None = None  # writes held until the output is out (deferred_writes)

# Bump when a reader changes what it writes into the tables for the same input.
READER_FORMAT_VERSION = 7  # 2: profiler span as event.profiler_span; 3: text columns dictionary-encoded;
# 4: hostile-input bounds (ts/dur and ids out of range dropped and counted, bound errors)
# 5: cat "taxbreak" (annotate's own tracks) skipped silently; 6: entries are Arrow IPC files, not Parquet
# 7: cat "overhead" as event.profiler_overhead (info)
DEFAULT_MAX_BYTES = 5 * 1024**3
ENTRY_FILE = "entry.json"
_TMP_PREFIX = ".tmp-"
MARKER_FILE = ".taxbreak-cache"
MARKER_TEXT = "taxbreak cache entry 1\n"  # the marker file's whole content
FINGERPRINT_BLOCK = 1024 * 1024  # bytes hashed at the start, middle and end of a trace


@dataclass(frozen=True)
class CacheStats:
    """What the parse cache holds: its folder, entry count and size in bytes."""

    root: Path
    entries: int
    size_bytes: int


def parse_cache_dir() -> Path:
    """The folder of the parse cache (``cache_dir() / "parse"``)."""
    return cache_dir() / "parse"


def max_cache_bytes() -> int:
    """The size cap: ``$TAXBREAK_CACHE_MAX_BYTES`` or 5 GiB (0 disables the cache writes)."""
    raw = os.environ.get("TAXBREAK_CACHE_MAX_BYTES", "")
    try:
        return max(0, int(raw)) if raw else DEFAULT_MAX_BYTES
    except ValueError:
        log.debug("TAXBREAK_CACHE_MAX_BYTES=%r is not an integer; using the default", raw)
        return DEFAULT_MAX_BYTES


def cache_key(path: str | Path, variant: str = "") -> str:
    """The entry name of ``path``: a hash of its identity, the tool and reader versions.

    Raises:
        OSError: when ``path`` cannot be stat'ed (the caller's parse reports it properly).
    """
    ident = [file_identity(path), __version__, READER_FORMAT_VERSION, variant, code_fingerprint("readers", "trace"),
             bound_settings()]
    return hashlib.sha256(json.dumps(ident).encode()).hexdigest()[:32]


BOUND_PREFIXES = ("TAXBREAK_MAX_", "TAXBREAK_NSYS_MAX_")


def bound_settings() -> list[list[str]]:
    """The reader bounds set in the environment (``TAXBREAK_MAX_*``, ``TAXBREAK_NSYS_MAX_*``):
    part of both caches' keys, since a lowered bound drops or refuses events, and a result
    read under it must not be served to a run under other bounds (docs/reliability.md)."""
    return sorted([name, value] for name, value in os.environ.items() if name.startswith(BOUND_PREFIXES))


def file_identity(path: str | Path) -> list:
    """``[absolute path, size, mtime_ns, ctime_ns, content fingerprint]`` of a file (both caches' keys).

    ``touch -r`` restores an mtime, never a ctime: any rewrite in place on this
    machine changes the key even where the sampled fingerprint cannot see the
    edit; the fingerprint covers what the ctime cannot (a rewrite within one
    clock tick, a file copied in with its times kept).

    Raises:
        OSError: when ``path`` cannot be stat'ed or read.
    """
    resolved = Path(path).resolve()
    st = resolved.stat()
    if not stat.S_ISREG(st.st_mode):  # a FIFO would block the fingerprint's read forever, a device never end
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return [str(resolved), st.st_size, st.st_mtime_ns, st.st_ctime_ns, content_fingerprint(resolved, st)]


def content_fingerprint(path: Path, st: os.stat_result | None = None) -> str:
    """BLAKE2b of the size and of the first, middle and last 1 MiB of ``path``.

    Three reads of 1 MiB, whatever the trace's size (a whole file up to 3 MiB).
    A rewrite of a gzip trace changes its last 8 bytes (CRC-32 and length of
    the content) and a rewrite of an SQLite export its header's change counter,
    so a sampled hash sees any rewrite of those; docs/reliability.md compares it
    with hashing every byte. Not memoized: file times tick coarsely (a rewrite
    within one tick keeps even the ctime), and the three reads cost ~3 ms.
    """
    st = st or path.stat()
    return _sampled_hash(path, st.st_size)


def _sampled_hash(path: Path, size: int) -> str:
    digest = hashlib.blake2b(str(size).encode(), digest_size=16)
    block = FINGERPRINT_BLOCK
    offsets = [0] if size <= 3 * block else [0, size // 2 - block // 2, size - block]
    with path.open("rb") as fh:
        for offset in offsets:
            fh.seek(offset)
            digest.update(fh.read(size if size <= 3 * block else block))
    return digest.hexdigest()


def code_fingerprint(*packages: str) -> list:
    """Name, size and mtime of every module of these ``taxbreak`` subpackages.

    Part of the cache keys, so that an edited checkout (a reader fixed without a
    bump of ``READER_FORMAT_VERSION``) misses instead of serving stale tables;
    an installed release never changes them.
    """
    files = [f for package in packages for f in sorted((_PACKAGE / package).glob("*.py"))]
    return [[f"{f.parent.name}/{f.name}", st.st_size, st.st_mtime_ns] for f in files for st in (f.stat(),)]


def cache_enabled(use_cache: bool | None = None) -> bool:
    """``use_cache`` itself when given; else on unless ``$TAXBREAK_NO_CACHE`` is set to a non-zero value."""
    if use_cache is None:
        return os.environ.get("TAXBREAK_NO_CACHE", "") in ("", "0")
    return bool(use_cache)


def cached_load(
    path: str | Path,
    parse: Callable[[Path], TraceTables],
    *,
    use_cache: bool | None = None,
    variant: str = "",
) -> TraceTables:
    """``parse(path)``, served from the parse cache when an entry is there.

    Args:
        path: the trace file.
        parse: the uncached parser (``readers.parse_trace`` with its options bound).
        use_cache: False parses and neither reads nor writes the cache (``--no-cache``);
            None (default) uses the cache unless ``$TAXBREAK_NO_CACHE`` is set to a non-zero value.
        variant: parse options that change the result, folded into the key.

    Returns:
        The tables, identical to what ``parse`` returns (Arrow IPC round trip).
    """
    src = Path(path)
    if not cache_enabled(use_cache) or not src.is_file():
        return parse(src)  # a missing/odd path: let the parser raise its typed error
    key = cache_key(src, variant)
    entry = parse_cache_dir() / key
    wait_for_writes(key)  # this process may still be writing the entry
    corrupt = False
    if is_entry(entry):
        tables = _read_entry(entry)
        if tables is not None:
            return tables
        corrupt = True
    tables = parse(src)
    _store(tables, entry)
    if corrupt:
        tables.diagnostics.add("cache.corrupt_entry", 1, f"{entry} unreadable; parsed {src} again")
    return tables


def _read_entry(entry: Path) -> TraceTables | None:
    """The tables of a complete entry, or None (and the entry removed) when unreadable."""
    start = time.perf_counter()
    try:
        tables = TraceTables.from_arrow(entry)
    except Exception as err:  # noqa: BLE001 - any unreadable entry is rebuilt, never fatal
        log.debug("parse cache entry %s unreadable (%s: %s); rebuilding", entry, type(err).__name__, err)
        remove_entry(entry)
        return None
    _touch(entry / ENTRY_FILE)
    log.debug("parse cache hit %s in %.3f s", entry.name, time.perf_counter() - start)
    return tables


def _store(tables: TraceTables, entry: Path) -> None:
    """Write the entry in a background thread: LZ4 and file writes release the GIL, so
    on a cold ``analyze`` the write overlaps the decomposition instead of adding to it.

    The thread writes a snapshot (the Arrow tables are immutable; metadata and
    diagnostics are serialized now) so later changes to ``tables`` cannot race
    with it, and it lets go of each table once written, so the tables are
    released over the ~2 s of the write at 10 M events, not at its end.
    It is not a daemon: the interpreter waits for it before exiting.
    """
    snapshot = {name: tables.table(name) for name in TABLE_NAMES}
    meta_json = tables.meta_json()
    store_in_background(entry, partial(write_arrow, snapshot, meta_json), {"path": tables.meta.path})


def store_in_background(entry: Path, write: Callable[[Path], object], record: dict, *, hold: bool = False) -> None:
    """:func:`store_entry` in a non-daemon thread that :func:`wait_for_writes` can join.

    ``write`` must only read data that nothing changes afterwards (a snapshot).
    ``hold``: inside :func:`deferred_writes`, start the thread only when that block
    ends (a snapshot that stays in memory anyway, as the analysis cache's frames).
    """
    writer = threading.Thread(target=store_entry, args=(entry, write, record), name=f"taxbreak-cache-{entry.name[:8]}")
    with _PENDING_LOCK:
        _PENDING[entry.name] = writer
        if hold and _HELD is not None:
            _HELD.append(writer)
            return
    writer.start()


def writes_held() -> bool:
    """Whether a :func:`deferred_writes` block is open (a held write may read its data late)."""
    return _HELD is not None


@contextlib.contextmanager
def deferred_writes() -> Iterator[None]:
    """Hold the cache writes asked for with ``hold=True`` until the block ends.

    The CLI wraps its analysis and its output in this block: the analysis cache's
    write then runs after the report is out instead of taking CPU from the
    decomposition on a 2-core machine (docs/performance.md, "Cache writes").
    A :func:`wait_for_writes` inside the block starts a held write first.
    """
    global _HELD
    with _PENDING_LOCK:
        outer, _HELD = _HELD, []
    try:
        yield
    finally:
        with _PENDING_LOCK:
            held, _HELD = _HELD, outer
        for writer in held:
            _start_once(writer)


def _start_once(writer: threading.Thread) -> None:
    try:
        writer.start()
    except RuntimeError:  # already started by wait_for_writes
        pass


def wait_for_writes(key: str | None = None) -> None:
    """Block until background cache writes (of ``key``, or all) have finished."""
    with _PENDING_LOCK:
        writers = [w for k, w in _PENDING.items() if key is None or k == key]
    for writer in writers:
        if writer.ident is None:  # held by deferred_writes: started now, as the caller needs the entry
            _start_once(writer)
        writer.join()
    with _PENDING_LOCK:
        for k in [k for k, w in _PENDING.items() if w.ident is not None and not w.is_alive()]:
            del _PENDING[k]


def store_entry(entry: Path, write: Callable[[Path], object], record: dict) -> bool:
    """Write a cache entry atomically: ``write(tmp)``, then ``entry.json``, then rename.

    Shared by the parse cache and the analysis cache (``taxbreak.scale.analysis_cache``).
    Never raises: a cache that cannot be written only costs time.

    Returns:
        True when this call stored the entry.
    """
    cap = max_cache_bytes()
    if cap == 0:
        return False
    tmp = entry.parent / f"{_TMP_PREFIX}{entry.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        tmp.mkdir(parents=True)
        (tmp / MARKER_FILE).write_text(MARKER_TEXT)  # first: even a half-written folder is known as ours
        write(tmp)
        files = sorted(f.name for f in tmp.iterdir() if f.name not in (MARKER_FILE, ENTRY_FILE))
        record = dict(record, written_at=time.time(), version=__version__, files=files)
        (tmp / ENTRY_FILE).write_text(json.dumps(record))
        os.rename(tmp, entry)  # atomic on POSIX; fails if another writer got there first
    except (OSError, ValueError, TypeError) as err:  # disk full, permissions, an unserializable value
        log.debug("cache entry %s not stored (%s)", entry.name, err)
        if has_marker(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
        return False
    prune_cache(cap)
    return True


def has_marker(folder: Path) -> bool:
    """Whether ``folder`` carries taxbreak's marker file (so taxbreak wrote it)."""
    try:
        return (folder / MARKER_FILE).read_text() == MARKER_TEXT
    except (OSError, UnicodeDecodeError):
        return False


def is_entry(entry: Path) -> bool:
    """A complete entry written by taxbreak as this user: the marker file and ``entry.json``.

    A cache folder shared between users (``$TAXBREAK_CACHE_DIR`` on a team disk)
    may hold entries another user wrote: their tables are not trusted (they could
    hold any numbers), so an entry whose folder or ``entry.json`` someone else owns
    is no entry here: it is neither read, nor counted, nor removed."""
    record = entry / ENTRY_FILE
    return record.is_file() and has_marker(entry) and owned_by_me(entry) and owned_by_me(record)


def owned_by_me(path: Path) -> bool:
    """Whether this process's effective user owns ``path`` (the link itself, not its target)."""
    try:
        return os.lstat(path).st_uid == os.geteuid()
    except OSError:
        return False


def remove_entry(entry: Path) -> bool:
    """Remove the files taxbreak wrote into ``entry`` (those its ``entry.json`` lists,
    the record and the marker), then the folder if nothing else is left in it.

    Returns:
        True when the folder is gone.
    """
    if not has_marker(entry):
        return False
    for name in _listed_files(entry) + [ENTRY_FILE, MARKER_FILE]:
        try:
            (entry / name).unlink()
        except OSError:  # already gone (a concurrent clear), or not a file
            pass
    try:
        entry.rmdir()
    except OSError:  # a file taxbreak did not write is in it: the folder stays
        return False
    return True


def _removed(entry: Path) -> bool:
    """:func:`remove_entry`, True when the entry is gone as an entry (its record removed;
    a stray file of someone else's may keep the folder)."""
    remove_entry(entry)
    return not os.path.lexists(entry / ENTRY_FILE)


def _listed_files(entry: Path) -> list[str]:
    """Plain file names listed in ``entry.json`` (no separators: nothing outside the entry)."""
    try:
        files = json.loads((entry / ENTRY_FILE).read_text()).get("files", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [f for f in files if isinstance(f, str) and f and "/" not in f and f not in (".", "..")]


def _touch(marker: Path) -> None:
    try:
        os.utime(marker)
    except OSError:  # read-only cache: still usable, only the LRU order is stale
        pass


def cache_roots() -> list[Path]:
    """Every cache kind sharing the size cap: parsed tables and analysis results."""
    return [parse_cache_dir(), cache_dir() / "analysis"]


def touch_entry(entry: Path) -> None:
    """Mark ``entry`` as just used (least-recently-used eviction)."""
    _touch(entry / ENTRY_FILE)


def _entries() -> list[tuple[float, int, Path]]:
    """(last use, size in bytes, folder) of each complete entry of every cache kind."""
    found = []
    for root in cache_roots():
        if root.is_dir():
            found += _entries_in(root)
    return found


def _entries_in(root: Path) -> list[tuple[float, int, Path]]:
    found = []
    for entry in root.iterdir():
        marker = entry / ENTRY_FILE
        if entry.name.startswith(_TMP_PREFIX) or entry.is_symlink() or not is_entry(entry):
            continue
        try:
            size = sum(f.stat().st_size for f in entry.iterdir() if f.is_file())
            found.append((marker.stat().st_mtime, size, entry))
        except OSError:  # removed by a concurrent clear/prune while listing
            continue
    return found


def cache_stats() -> CacheStats:
    """How many entries the caches hold (parsed tables and analyses) and their total size."""
    entries = _entries()
    return CacheStats(cache_dir(), len(entries), sum(size for _, size, _ in entries))


def prune_cache(max_bytes: int) -> int:
    """Remove the least recently used entries until the cache holds at most ``max_bytes``.

    Returns:
        The number of entries removed.
    """
    entries = sorted(_entries())  # oldest use first
    total = sum(size for _, size, _ in entries)
    removed = 0
    for _, size, entry in entries:
        if total <= max_bytes:
            break
        remove_entry(entry)
        total -= size
        removed += 1
    return removed


def clear_cache(stale_tmp_age_s: float = 3600.0) -> CacheStats:
    """Empty the parse cache and the analysis cache.

    Complete entries are removed; temporary folders of writers are removed only
    when older than ``stale_tmp_age_s`` so a concurrent writer is not disturbed.
    Only folders carrying taxbreak's marker are touched (:func:`remove_entry`).

    Returns:
        What was removed (entries and bytes); entries that stay (a foreign file in
        the folder, no permission) are not counted.
    """
    removed = [(size, entry) for _, size, entry in _entries() if _removed(entry)]
    now = time.time()
    for root in cache_roots():
        if not root.is_dir():
            continue
        for tmp in root.glob(f"{_TMP_PREFIX}*"):
            try:
                is_stale = now - tmp.stat().st_mtime > stale_tmp_age_s
            except OSError:  # its writer renamed or removed it meanwhile
                continue
            if is_stale and not tmp.is_symlink() and has_marker(tmp) and owned_by_me(tmp):  # a foreign .tmp-* stays
                shutil.rmtree(tmp, ignore_errors=True)
    # what was removed, not what was there: an entry that could not be removed is not counted
    return CacheStats(cache_dir(), len(removed), sum(size for size, _ in removed))
