"""One sanitizing rule per output kind, applied where text from a trace enters that output.

Names (kernels, ops, GPU and model names, paths) come from untrusted traces
and manifests (docs/reliability.md, "Outputs"):

* terminal: :func:`taxbreak.trace.text.safe_text` (controls, bidi overrides and
  newlines written as visible ``\\x1b`` / ``\\u202e`` escapes);
* Markdown: :func:`markdown_text`, the terminal rule (so a name is one line and
  cannot start a heading) plus a backslash before each mark that opens a construct
  mid-line (no link, image, emphasis, code, table cell, HTML tag or autolink can be formed);
* CSV: :func:`csv_frame`, a ``'`` before a text cell that starts with ``=``,
  ``+``, ``-``, ``@``, tab or carriage return (a spreadsheet would run it as a formula);
* HTML: :func:`html_text`, controls and bidi overrides as visible escapes
  (``innocent\\u202egnp.exe`` must not read as ``innocentexe.png``), then ``& < > " '``
  escaped (:func:`taxbreak.report.markup.esc` applies it to every value);
* XML (JUnit): :func:`xml_text`, the same visible escapes, and the characters
  XML 1.0 cannot hold even escaped removed (ElementTree escapes the markup characters).
"""
from __future__ import annotations

import html
import re

from ..trace.text import safe_text

# the marks that open a Markdown construct mid-line (emphasis, code, links, images, raw HTML, entities,
# table cells, autolinks); a line cannot be started by a name, so heading and list marks need none
_PUNCTUATION = {ord(c): "\\" + c for c in "\\`*_[]<!|~&:@#"}
_WWW = re.compile("(?i)(www)\\.")  # GFM autolinks www.example.com
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# what text content can hold as it is: tab, newline and carriage return are kept in HTML and XML text
_KEPT = {0x09: "\t", 0x0A: "\n", 0x0D: "\r"}
# characters XML 1.0 cannot hold at all, not even escaped (lone surrogates, U+FFFE/U+FFFF, C0 controls)
_XML_ILLEGAL = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def markdown_text(value: object) -> str:
    """``value`` as Markdown text that renders as exactly that text, on one line."""
    return _WWW.sub(r"\1\\.", safe_text(value).translate(_PUNCTUATION))


def visible_text(value: object) -> str:
    """:func:`safe_text` keeping tab, newline and carriage return (HTML and XML text may hold them)."""
    text = value if isinstance(value, str) else str(value)
    if text.isascii() and text.isprintable():
        return text
    return "".join(safe_text(part) if part not in _KEPT.values() else part for part in re.split("([\t\n\r])", text))


def html_text(value: object) -> str:
    """``value`` escaped for HTML text or a quoted attribute, controls and bidi overrides shown as escapes."""
    return html.escape(visible_text(value), quote=True)


def xml_text(value: object) -> str:
    """``value`` for an XML 1.0 text or attribute: controls and bidi overrides shown as escapes,
    anything XML cannot hold removed (ElementTree escapes ``& < > "``)."""
    return _XML_ILLEGAL.sub("", visible_text(value))


def csv_cell(value: object) -> object:
    """A text cell that a spreadsheet would read as a formula, with a ``'`` in front; others unchanged."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def csv_frame(frame):
    """``frame`` with :func:`csv_cell` applied to its text and categorical columns (vectorized per column)."""
    out = frame
    for column in frame.columns:
        values = frame[column]
        if not (values.dtype == object or str(values.dtype) in ("str", "string", "category")):
            continue
        text = values.astype("string")
        risky = text.str.startswith(_FORMULA_START).fillna(False).astype(bool)
        if risky.any():
            out = out.copy(deep=False) if out is frame else out
            out[column] = values.astype(object).where(~risky, "'" + text[risky])
    return out
