"""Text from a trace made safe for a terminal.

Kernel, op, thread and file names come from untrusted traces. Printed as they
are, an escape sequence in a name reaches the terminal: OSC 52 writes the
clipboard, OSC 0 sets the window title, CSI clears the screen, OSC 8 makes
hyperlinks; a right-to-left override (U+202E) makes ``exe.txt`` read as
``txt.exe``. :func:`safe_text` writes every such character as a visible escape
(``\\x1b``, ``\\u202e``), so the text stays readable and nothing is lost or
acted upon. JSON, Parquet and HTML outputs keep names exactly (they have their
own escaping); only what reaches a console goes through here.
"""
from __future__ import annotations

import re

# C0 controls (newline and tab included: a name is one line), DEL, C1 controls.
_CONTROLS = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]
# Bidirectional formatting (embeddings, overrides, isolates, marks) and the
# line/paragraph separators, which move or break text on screen.
_INVISIBLE = [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029]
# Lone surrogates cannot be encoded for output (printing one would raise).
_SURROGATES = range(0xD800, 0xE000)

_ESCAPES: dict[int, str] = {
    **{c: f"\\x{c:02x}" for c in _CONTROLS},
    **{c: f"\\u{c:04x}" for c in (*_INVISIBLE, *_SURROGATES)},
}


def safe_text(value: object) -> str:
    """``value`` as text with control, bidi-formatting and surrogate characters
    written as visible escapes (``"a\\x1b]52;c;..."``); other text unchanged."""
    text = value if isinstance(value, str) else str(value)
    return text.translate(_ESCAPES)


def is_safe(text: str) -> bool:
    """Whether :func:`safe_text` would leave ``text`` unchanged."""
    return text.translate(_ESCAPES) == text


# In JSON text these can only occur inside strings, where \uXXXX is the same character
# (tab, newline and carriage return also occur as whitespace between tokens: kept).
_JSON_ESCAPES: dict[int, str] = {c: f"\\u{c:04x}" for c in (*_CONTROLS, *_INVISIBLE) if c not in (0x09, 0x0A, 0x0D)}


def json_for_terminal(text: str) -> str:
    """JSON text with every control and bidi-formatting character written as a
    ``\\uXXXX`` escape: the same JSON values, nothing a terminal acts upon.
    (JSON encoders escape C0 already; DEL, C1 and bidi characters they pass raw.)"""
    return text.translate(_JSON_ESCAPES)


# The UTF-8 encodings of the characters of _JSON_ESCAPES: C0 (but tab, newline, carriage return),
# DEL, C1 (U+0080-009F), U+061C, U+200E-200F, U+2028-202E, U+2066-2069.
_JSON_ESCAPE_BYTES = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\xc2[\x80-\x9f]|\xd8\x9c"
                                rb"|\xe2\x80[\x8e\x8f\xa8-\xae]|\xe2\x81[\xa6-\xa9]")


def json_bytes_for_terminal(data: bytes) -> bytes:
    """:func:`json_for_terminal` of UTF-8 JSON bytes, as UTF-8 bytes. JSON without
    any of those characters (the usual summary, "µs" and "Δ" included) is returned
    as it is: one byte scan instead of a text copy of a ~100 MB summary."""
    if _JSON_ESCAPE_BYTES.search(data) is None:
        return data
    return json_for_terminal(data.decode()).encode()
