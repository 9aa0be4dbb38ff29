"""Reading the bytes of a Kineto file, plain or gzip, with exact errors.

Gzip is inflated with :mod:`zlib` into one ``bytearray`` preallocated from the gzip trailer
rather than ``gzip.open().read()``, which joins a list of pieces and so holds the
uncompressed trace twice at its peak. A stream that ends early is a typed
``gzip.truncated`` error, or, with ``allow_truncated``, the inflated prefix is
kept and the JSON layer recovers its complete events. The inflated size and its
ratio to the compressed bytes are held to the bounds of :mod:`bounds`
(``gzip.too_large``, ``gzip.ratio``), checked after every inflate step.
"""
from __future__ import annotations

import zlib
from pathlib import Path

from ..trace.errors import TraceFormatError, TraceNotFoundError
from . import bounds as B

GZIP_MAGIC = b"\x1f\x8b"
_IN_STEP = 256 << 10  # compressed bytes per zlib call
_OUT_STEP = 16 << 20  # inflated bytes per zlib call at most (Kineto JSON: ~2.5 MB per slice)


def read_trace_bytes(path: Path, allow_truncated: bool,
                     bounds: B.Bounds = B.Bounds()) -> tuple[bytes | bytearray, str | None]:
    """The uncompressed JSON bytes of ``path``.

    Returns:
        ``(data, truncation)``: ``truncation`` describes a gzip stream that ended
        early (only with ``allow_truncated``), else ``None``.

    Raises:
        TraceNotFoundError: ``input.not_found`` / ``input.unreadable``.
        TraceFormatError: ``gzip.truncated`` for a short or corrupt gzip stream;
            ``gzip.too_large`` / ``gzip.ratio`` past the inflate bounds.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError as err:
        raise TraceNotFoundError("input.not_found", "no such file", str(path), hint="check the path") from err
    except OSError as err:
        raise TraceNotFoundError("input.unreadable", f"cannot read the file: {err.strerror}", str(path)) from err
    if raw[:2] != GZIP_MAGIC:
        return raw, None
    return gunzip(raw, path, allow_truncated, bounds)


def gunzip(raw: bytes, path: Path, allow_truncated: bool,
           bounds: B.Bounds = B.Bounds()) -> tuple[bytearray, str | None]:
    """Inflate every gzip member of ``raw`` (see module doc), within ``bounds``."""
    out = _Output(min(_size_hint(raw), bounds.inflated_bytes))
    pending: bytes = raw
    while True:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            pending = _inflate_member(inflater, pending, out, _Budget(path, bounds, len(raw) - len(pending)))
        except zlib.error as err:
            return _short_stream(out.done(), path, allow_truncated, f"corrupt gzip data ({err})", len(raw))
        if not inflater.eof:
            return _short_stream(out.done(), path, allow_truncated, "the gzip stream ends early", len(raw))
        consumed = len(raw) - len(pending)
        rest = pending.lstrip(b"\x00")  # padding after a member is allowed by gzip(1)
        if not rest:
            return out.done(), None
        if rest[:2] != GZIP_MAGIC:
            msg = f"{len(rest)} bytes of garbage after the gzip stream"
            return _short_stream(out.done(), path, allow_truncated, msg, consumed)
        pending = rest


class _Output:
    """A preallocated bytearray filled in place: no realloc copies while it grows."""

    def __init__(self, size_hint: int) -> None:
        self.buf = bytearray(size_hint)
        self.filled = 0

    def write(self, piece: bytes) -> None:
        end = self.filled + len(piece)
        self.buf[self.filled:min(end, len(self.buf))] = piece  # grows only past the hint
        self.filled = end

    def done(self) -> bytearray:
        del self.buf[self.filled:]
        return self.buf


def _size_hint(raw: bytes) -> int:
    """The uncompressed size from the gzip trailer (ISIZE, size mod 2**32), when plausible."""
    isize = int.from_bytes(raw[-4:], "little") if len(raw) >= 18 else 0
    return isize if isize <= 64 * len(raw) else 0


class _Budget:
    """The inflate bounds for one member that starts at compressed byte ``offset``."""

    def __init__(self, path: Path, bounds: B.Bounds, offset: int) -> None:
        self.path, self.bounds, self.offset = path, bounds, offset

    def check(self, out: _Output, consumed: int) -> None:
        B.check_inflated(self.path, self.bounds, out.filled, self.offset + consumed)


def _inflate_member(inflater, pending: bytes, out: _Output, budget: _Budget) -> bytes:
    """Inflate one member into ``out``; returns the bytes after it.

    The input is fed in slices rather than with ``max_length`` alone: with a cap,
    zlib hands back ``unconsumed_tail``, a fresh copy of the rest of the input,
    here of one slice. The cap (``_OUT_STEP``) only bites on a bomb, whose
    output is checked against the bounds piece by piece.
    """
    view = memoryview(pending)
    for start in range(0, len(view), _IN_STEP):
        piece = view[start:start + _IN_STEP]
        while piece:
            out.write(inflater.decompress(piece, _OUT_STEP))
            piece = inflater.unconsumed_tail
            budget.check(out, min(start + _IN_STEP, len(view)) - len(piece))
        if inflater.eof:
            return inflater.unused_data + bytes(view[start + _IN_STEP:])
    return b""  # input exhausted before the end of the stream


def _short_stream(out: bytearray, path: Path, allow_truncated: bool, why: str, offset: int):
    if allow_truncated:
        return out, f"{why} at compressed byte {offset:,}; {len(out):,} bytes inflated"
    raise TraceFormatError(
        "gzip.truncated",
        why,
        str(path),
        location=f"compressed byte {offset:,}, {len(out):,} bytes inflated",
        hint="the file was probably copied or written incompletely; "
        "--allow-truncated keeps the complete events of the inflated part",
    )
