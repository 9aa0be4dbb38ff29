"""Streaming decode of a valid Kineto file: memory bounded by the chunk size.

The file is read (and inflated) in 1 MiB blocks into a rolling buffer. The keys
before ``traceEvents`` are decoded once the array's ``[`` is seen; then events
are cut into ~2 MB chunks at ``}`` ``,`` ``{`` boundaries exactly as in
:mod:`kineto_events` (a cut is accepted only when the chunk decodes) and each
chunk is handed on and dropped. At the end of the file the array's closing
``]`` is found by letting msgspec decode ``[`` + rest: it stops with "trailing
characters (byte N)" where the array ends, and the keys after it are decoded
from there.

Anything unexpected (invalid JSON, a truncated file or gzip stream, a header
that does not decode) raises :class:`StreamFallback`; the reader then parses
the file the whole-buffer way, which gives the exact typed error or recovers
the truncated tail. Valid files never need the whole JSON in memory.
"""
from __future__ import annotations

import os
import queue
import re
import threading
import zlib
from pathlib import Path
from typing import Callable, Iterator

import msgspec

try:  # ISA-L inflate: ~2.7x zlib's speed on Kineto JSON (docs/performance.md); zlib where no wheel exists
    from isal import isal_zlib as inflate_lib
except ImportError:  # pragma: no cover - isal is a dependency; kept for platforms without its wheel
    inflate_lib = zlib

from ..trace.progress import TABLES_STAGE, report_bytes
from . import bounds as B
from .kineto_events import CHUNK_BYTES, decode_chunk, find_events_array
from .kineto_io import GZIP_MAGIC

BLOCK_BYTES = 1 << 20
INFLATED_PIECE_BYTES = 8 << 20  # the most one inflate call returns (Kineto JSON: ~2.5 MB per 256 KiB read)
_AHEAD_BLOCKS = 4  # inflated blocks (~2 MB each) the inflate thread may run ahead
_CUT = re.compile(rb"\}\s*,\s*\{")
_TRAILING = re.compile(r"trailing characters \(byte (\d+)\)")


class StreamFallback(Exception):
    """The streaming path cannot finish; parse the whole buffer instead."""


def iter_blocks(path: Path, bounds: B.Bounds = B.Bounds()) -> Iterator[bytes]:
    """The uncompressed bytes of ``path`` in blocks (gzip inflated on the fly).

    Gzip is inflated in a background thread (:func:`_inflate_ahead`): zlib
    releases the GIL, so on a second core inflating overlaps with decoding.

    Raises:
        TraceFormatError: ``gzip.too_large`` / ``gzip.ratio`` past the inflate bounds.
    """
    with path.open("rb") as fh:
        head = fh.read(2)
        fh.seek(0)
        size = os.fstat(fh.fileno()).st_size
        if head != GZIP_MAGIC:
            while block := fh.read(BLOCK_BYTES):
                report_bytes(fh.tell(), size)
                yield block
        else:
            for block in _inflate_ahead(fh, bounds):
                # the compressed position (the inflate thread may be a few blocks ahead): enough for a bar
                report_bytes(fh.tell(), size)
                yield block
        # every byte is read; the tables are built from the columns next (~1.5 s at 1 M events)
        report_bytes(size, size, stage=TABLES_STAGE)


def _inflate_blocks(fh, bounds: B.Bounds) -> Iterator[bytes]:
    """Inflate one gzip member block by block; anything else is a :class:`StreamFallback`.

    One call returns at most ``INFLATED_PIECE_BYTES`` (a bomb inflates ~1,000x),
    and the inflated and compressed totals are checked against the bounds after each.
    """
    inflater = inflate_lib.decompressobj(16 + inflate_lib.MAX_WBITS)
    inflated = 0
    while block := fh.read(BLOCK_BYTES // 4):
        pending = block
        while pending:
            try:
                piece = inflater.decompress(pending, INFLATED_PIECE_BYTES)
            except (zlib.error, inflate_lib.error) as err:
                raise StreamFallback(str(err)) from err
            inflated += len(piece)
            B.check_inflated(None, bounds, inflated, fh.tell() - len(inflater.unconsumed_tail))
            yield piece
            pending = inflater.unconsumed_tail
        if inflater.eof:
            if inflater.unused_data.strip(b"\x00") or fh.read(1):
                raise StreamFallback("data after the gzip member")  # multi-member: whole-buffer path
            return
    raise StreamFallback("the gzip stream ends early")


_DONE = object()


def _inflate_ahead(fh, bounds: B.Bounds, depth: int = _AHEAD_BLOCKS) -> Iterator[bytes]:
    """:func:`_inflate_blocks` run in a thread, at most ``depth`` blocks ahead
    (bounded memory); its exception is re-raised here, in the reader's thread."""
    blocks: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for block in _inflate_blocks(fh, bounds):
                if not _put(blocks, block, stop):
                    return
            _put(blocks, _DONE, stop)
        except BaseException as err:  # handed to the reader thread, raised there
            _put(blocks, err, stop)

    worker = threading.Thread(target=produce, name="taxbreak-inflate", daemon=True)
    worker.start()
    try:
        while (item := blocks.get()) is not _DONE:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:  # also when the reader stops early: release the thread before the file closes
        stop.set()
        worker.join()


def _put(blocks: queue.Queue, item, stop: threading.Event) -> bool:
    """Put unless the reader has stopped listening; False when it has."""
    while not stop.is_set():
        try:
            blocks.put(item, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False


class EventStream:
    """Decoded chunks of a streamed ``traceEvents`` array, and the top-level keys around it.

    Use: ``stream = EventStream(blocks, decode_top)``; ``stream.header`` is the
    decoded top level before the array; iterate ``stream.chunks()`` for
    ``(first_index, events, bad)``; then ``stream.trailer`` holds the keys after it.
    ``decode_top(text)`` returns the decoded object and the set of its keys
    (``header_keys``, ``trailer_keys``: the reader refuses a key in both).

    The buffer holds two chunks and one event; past ``bounds.string_bytes`` more
    (a giant string, a run of spaces) the stream stops with ``json.too_long``.
    """

    def __init__(self, blocks: Iterator[bytes], decode_top: Callable, bounds: B.Bounds = B.Bounds()) -> None:
        self._blocks = blocks
        self._top = decode_top
        self._buf = bytearray()
        self._eof = False
        self._bounds = bounds
        self._max_held = 2 * CHUNK_BYTES + 2 * INFLATED_PIECE_BYTES + bounds.string_bytes
        self.trailer = None
        self.header_keys: frozenset[str] = frozenset()
        self.trailer_keys: frozenset[str] = frozenset()
        self.header = self._read_header()

    def _more(self) -> bool:
        block = next(self._blocks, None)
        if block is None:
            self._eof = True
            return False
        if len(self._buf) > self._max_held:
            raise B.too_long(None, self._bounds, len(self._buf))
        self._buf += block
        return True

    def _read_header(self):
        start = None
        while start is None:
            if len(self._buf) > self._max_held:  # odd but maybe valid (an escaped key): the whole-buffer path
                raise StreamFallback("no traceEvents array near the start")
            if not self._more() and self._eof:
                raise StreamFallback("no traceEvents array")
            start = find_events_array(memoryview(self._buf)) if len(self._buf) > 1 else None
        head = bytes(self._buf[:start]).strip()
        self.is_array_file = head == b""
        try:
            top, self.header_keys = self._top(b"{}" if self.is_array_file else head + b"[]}")
        except msgspec.MsgspecError as err:
            raise StreamFallback(str(err)) from err
        del self._buf[: start + 1]
        return top

    def chunks(self, chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple[int, list, list]]:
        """Decode the array chunk by chunk (see module doc)."""
        first = 0
        while True:
            self._fill(2 * chunk_bytes)
            found = self._next_chunk(first, chunk_bytes)
            if found is None:
                break
            events, bad, consumed = found
            del self._buf[:consumed]
            n_decoded = len(events) + len(bad)
            yield first, events, bad
            del events, bad
            first += n_decoded
        yield from self._last_chunk(first)

    def _next_chunk(self, first: int, chunk_bytes: int):
        """Decode up to a cut after ``chunk_bytes``; None when the rest must wait for the end."""
        target = chunk_bytes
        while (match := self._find_cut(target)) is not None:
            chunk = self._chunk_text(match)
            try:
                events, bad = decode_chunk(chunk, first)
                return events, bad, match.end() - 1
            except msgspec.DecodeError as err:
                if _TRAILING.search(str(err)):
                    return None  # the array ended before this cut: the rest is the last chunk
                if not _is_bad_cut(err, len(chunk)):
                    raise StreamFallback(str(err)) from err
                target = match.end() - 1
        return None

    def _last_chunk(self, first: int) -> Iterator[tuple[int, list, list]]:
        """The events after the last cut, the array's end, and the keys that follow it."""
        events, bad = decode_chunk(self._last_part(), first)
        yield first, events, bad

    def raw_chunks(self, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
        """The array as ``[...]`` chunks cut at ``}`` ``,`` ``{`` but not decoded here.

        For :mod:`kineto_parallel`, which decodes them in two processes: a cut
        that falls inside a value is found by whichever process decodes the chunk.
        """
        while True:
            self._fill(2 * chunk_bytes)
            if len(self._buf) < 2 * chunk_bytes:  # the input ends within two chunks: the last part
                break
            match = self._find_cut(chunk_bytes)
            if match is None:
                break
            yield self._chunk_text(match)
            del self._buf[: match.end() - 1]
        yield self._last_part()

    def _fill(self, size: int) -> None:
        """Read blocks until ``size`` bytes are buffered or the input ends."""
        while len(self._buf) < size and not self._eof:
            self._more()

    def _find_cut(self, start: int):
        """The first candidate cut at or after ``start``, reading blocks until one
        appears (an event longer than a chunk); None at the end of the input."""
        while (match := _CUT.search(self._buf, start)) is None:
            if self._eof or not self._more():
                return None
        return match

    def _chunk_text(self, match) -> bytes:
        """The buffered events before the cut ``match`` as a ``[...]`` array."""
        return b"".join((b"[", memoryview(self._buf)[: match.start() + 1], b"]"))

    def _last_part(self) -> bytes:
        """The rest of the array as ``[...]`` (its end found by msgspec); reads the trailer."""
        while self._more():
            pass
        text = b"".join((b"[", self._buf))
        end = len(text)
        try:
            msgspec.json.decode(text, type=msgspec.Raw)
            if not self.is_array_file:
                raise StreamFallback("no closing brace after traceEvents")
        except msgspec.DecodeError as err:
            match = _TRAILING.search(str(err))
            if match is None or self.is_array_file:
                raise StreamFallback(str(err)) from err
            # msgspec reports the byte after the first trailing character: the array
            # itself ends at the last "]" before it
            end = text.rfind(b"]", 0, int(match.group(1))) + 1
        self._read_trailer(text[end:])
        return text[:end]

    def _read_trailer(self, rest: bytes) -> None:
        rest = rest.strip()
        if self.is_array_file or rest == b"}":
            return
        if not rest.startswith(b","):
            raise StreamFallback("unexpected bytes after traceEvents")
        try:
            self.trailer, self.trailer_keys = self._top(b"{" + rest[1:])
        except msgspec.MsgspecError as err:
            raise StreamFallback(str(err)) from err


def _is_bad_cut(err: msgspec.DecodeError, chunk_len: int) -> bool:
    """A chunk that fails only at its very end was cut inside a string or nested value."""
    text = str(err)
    if "truncated" in text:
        return True
    match = re.search(r"\(byte (\d+)\)", text)
    return match is not None and int(match.group(1)) >= chunk_len - 1
