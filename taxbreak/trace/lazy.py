"""Package names imported on first use (PEP 562 module ``__getattr__``).

Used by the packages whose public names would otherwise pull heavy imports into
every command: ``capture`` (torch), ``scale`` (pandas and the decomposer) and
``report`` (HTML, annotate, diff and budget modules).
"""
from __future__ import annotations

import importlib
from typing import Callable


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package`` that imports ``exports[name]`` (a submodule) on first use."""

    def __getattr__(name: str):
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f".{module}", package), name)

    return __getattr__
