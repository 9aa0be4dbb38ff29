"""The top-level members of a Kineto JSON object, refusing a key that appears twice.

JSON leaves duplicate keys undefined and readers disagree: msgspec keeps the last
value, a streaming reader the first, Chrome and Perfetto the last. A file with
two ``traceEvents`` arrays would be analysed differently by each path, so the
reader refuses it (``json.duplicate_key``).

No decoder reports duplicates, so they are found from where the values lie:
the object is decoded once into ``{key: msgspec.Raw}``, each Raw a zero-copy
view into the input. Between the end of one kept value and the start of the
next there must be exactly ``, "key":`` (with whitespace); a value dropped in
favour of a later one with the same key lies in such a gap and breaks the
pattern. The check costs a few regex matches per top-level key, nothing per event.
"""
from __future__ import annotations

import re

import msgspec
import numpy as np

from ..trace.errors import TraceFormatError

_MEMBERS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_KEY = rb'"(?:[^"\\]|\\.)*"'
_FIRST_GAP = re.compile(rb"\s*\{\s*(" + _KEY + rb")\s*:\s*")
_GAP = re.compile(rb"\s*,\s*(" + _KEY + rb")\s*:\s*")
_LAST_GAP = re.compile(rb"\s*\}\s*")
_EMPTY = re.compile(rb"\s*\{\s*\}\s*")


class DuplicateKey(Exception):
    """A top-level key appears twice (``key`` is its decoded name, or "" when unknown)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def duplicate_key_error(path, key: str) -> TraceFormatError:
    """``json.duplicate_key`` for :class:`DuplicateKey` ``key`` in the file at ``path``."""
    name = f"{key!r}" if key else "a top-level key"
    return TraceFormatError("json.duplicate_key", f"{name} appears twice at the top level", str(path),
                            hint="readers disagree on which copy counts; keep one and merge the other into it")


def object_members(buf) -> dict[str, msgspec.Raw]:
    """``{key: raw value}`` of the JSON object in ``buf`` (bytes-like).

    Raises:
        msgspec.DecodeError / ValidationError: as ``msgspec.json.decode``.
        DuplicateKey: a key appears twice.
    """
    members = _MEMBERS.decode(buf)
    check_unique(buf, members)
    return members


def check_unique(buf, members: dict[str, msgspec.Raw]) -> None:
    """Raise :class:`DuplicateKey` unless the gaps between the values of
    ``members`` hold exactly one key each (see module doc)."""
    data = memoryview(buf).cast("B")
    spans = sorted(_value_spans(data, members))
    if not spans:
        if _EMPTY.fullmatch(data) is None:
            raise DuplicateKey("")
        return
    gaps = [(_FIRST_GAP, 0, spans[0][0])]
    gaps += [(_GAP, end, start) for (_, end), (start, _) in zip(spans, spans[1:])]
    for pattern, start, end in gaps:
        if pattern.fullmatch(data, start, end) is None:
            raise DuplicateKey(_first_key(data, pattern, start, end))
    if _LAST_GAP.fullmatch(data, spans[-1][1]) is None:
        raise DuplicateKey(_first_key(data, _GAP, spans[-1][1], len(data)))


def _value_spans(data: memoryview, members: dict[str, msgspec.Raw]) -> list[tuple[int, int]]:
    """(start, end) byte offsets of each Raw value in ``data`` (Raw values are views into it)."""
    base = np.frombuffer(data, dtype=np.uint8).ctypes.data if len(data) else 0
    spans = []
    for raw in members.values():
        view = np.frombuffer(raw, dtype=np.uint8)
        start = view.ctypes.data - base
        if not 0 <= start <= len(data) - len(view):  # not a view into data: cannot check, refuse
            raise DuplicateKey("")
        spans.append((start, start + len(view)))
    return spans


def _first_key(data: memoryview, pattern: re.Pattern, start: int, end: int) -> str:
    """The key that opens a gap that holds more than one member: the repeated one."""
    match = pattern.match(data, start, end)
    if match is None:
        return ""
    try:
        return str(msgspec.json.decode(match.group(1)))
    except msgspec.MsgspecError:
        return ""
