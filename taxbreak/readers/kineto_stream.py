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

import queue
import re
import threading
import zlib
from pathlib import Path
from typing import Iterator

import msgspec

try:  # ISA-L inflate: ~2.7x zlib's speed on Kineto JSON (docs/performance.md); zlib where no wheel exists
    from isal import isal_zlib as inflate_lib
except ImportError:  # pragma: no cover - isal is a dependency; kept for platforms without its wheel
    inflate_lib = zlib

from .kineto_events import CHUNK_BYTES, decode_chunk, find_events_array
from .kineto_io import GZIP_MAGIC

BLOCK_BYTES = 1 << 20
_AHEAD_BLOCKS = 4  # inflated blocks (~2 MB each) the inflate thread may run ahead
_CUT = re.compile(rb"\}\s*,\s*\{")
_TRAILING = re.compile(r"trailing characters \(byte (\d+)\)")


class StreamFallback(Exception):
    """The streaming path cannot finish; parse the whole buffer instead."""


def iter_blocks(path: Path) -> Iterator[bytes]:
    """The uncompressed bytes of ``path`` in blocks (gzip inflated on the fly).

    Gzip is inflated in a background thread (:func:`_inflate_ahead`): zlib
    releases the GIL, so on a second core inflating overlaps with decoding.
    """
    with path.open("rb") as fh:
        head = fh.read(2)
        fh.seek(0)
        if head != GZIP_MAGIC:
            while block := fh.read(BLOCK_BYTES):
                yield block
            return
        yield from _inflate_ahead(fh)


def _inflate_blocks(fh) -> Iterator[bytes]:
    """Inflate one gzip member block by block; anything else is a :class:`StreamFallback`."""
    inflater = inflate_lib.decompressobj(16 + inflate_lib.MAX_WBITS)
    while block := fh.read(BLOCK_BYTES // 4):
        try:
            yield inflater.decompress(block)
        except (zlib.error, inflate_lib.error) as err:
            raise StreamFallback(str(err)) from err
        if inflater.eof:
            if inflater.unused_data.strip(b"\x00") or fh.read(1):
                raise StreamFallback("data after the gzip member")  # multi-member: whole-buffer path
            return
    raise StreamFallback("the gzip stream ends early")


_DONE = object()


def _inflate_ahead(fh, depth: int = _AHEAD_BLOCKS) -> Iterator[bytes]:
    """:func:`_inflate_blocks` run in a thread, at most ``depth`` blocks ahead
    (bounded memory); its exception is re-raised here, in the reader's thread."""
    blocks: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for block in _inflate_blocks(fh):
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

    Use: ``stream = EventStream(blocks, top_decoder)``; ``stream.header`` is the
    decoded top level before the array; iterate ``stream.chunks()`` for
    ``(first_index, events, bad)``; then ``stream.trailer`` holds the keys after it.
    """

    def __init__(self, blocks: Iterator[bytes], top_decoder: msgspec.json.Decoder) -> None:
        self._blocks = blocks
        self._top = top_decoder
        self._buf = bytearray()
        self._eof = False
        self.trailer = None
        self.header = self._read_header()

    def _more(self) -> bool:
        block = next(self._blocks, None)
        if block is None:
            self._eof = True
            return False
        self._buf += block
        return True

    def _read_header(self):
        start = None
        while start is None:
            if not self._more() and self._eof:
                raise StreamFallback("no traceEvents array")
            start = find_events_array(memoryview(self._buf)) if len(self._buf) > 1 else None
        head = bytes(self._buf[:start]).strip()
        self.is_array_file = head == b""
        try:
            top = self._top.decode(b"{}" if self.is_array_file else head + b"[]}")
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
            self.trailer = self._top.decode(b"{" + rest[1:])
        except msgspec.MsgspecError as err:
            raise StreamFallback(str(err)) from err


def _is_bad_cut(err: msgspec.DecodeError, chunk_len: int) -> bool:
    """A chunk that fails only at its very end was cut inside a string or nested value."""
    text = str(err)
    if "truncated" in text:
        return True
    match = re.search(r"\(byte (\d+)\)", text)
    return match is not None and int(match.group(1)) >= chunk_len - 1
