"""Escape-by-default HTML/SVG building.

Every string taken from a trace (kernel, op, annotation, process names) is
untrusted: a kernel named ``<script>alert(1)</script>`` must render as text.
:func:`tag` escapes every child and attribute value unless it is already
:class:`Markup` (built by :func:`tag` itself), so markup cannot be injected by
forgetting a call to ``escape``.
"""
from __future__ import annotations

from .sanitize import html_text


class Markup(str):
    """A string that is already safe HTML/SVG."""

    __slots__ = ()


def esc(value) -> Markup:
    """Escape any value for text or a quoted attribute (``& < > " '``)."""
    if isinstance(value, Markup):
        return value
    return Markup(html_text(value))  # bidi overrides and controls shown as escapes (report/sanitize.py)


def join(parts) -> Markup:
    """Concatenate children, escaping those that are not Markup."""
    return Markup("".join(esc(p) for p in parts if p is not None))


def tag(name: str, *children, **attrs) -> Markup:
    """``<name attrs>children</name>``; ``class_`` → ``class``, ``_`` → ``-``.

    Attribute values that are None or False are left out; True writes the bare name.
    """
    rendered = []
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        key = key.rstrip("_").replace("_", "-")
        rendered.append(f" {key}" if value is True else f' {key}="{esc(value)}"')
    return Markup(f"<{name}{''.join(rendered)}>{join(children)}</{name}>")


def void(name: str, **attrs) -> Markup:
    """A self-closing element (SVG ``<rect/>``, HTML ``<meta>``)."""
    inner = tag(name, **attrs)
    return Markup(inner[: -len(f"></{name}>")] + "/>")
