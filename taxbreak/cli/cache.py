"""``taxbreak cache info|clear``: the parse cache (taxbreak/readers/cache.py)."""
from __future__ import annotations

import click

from ..trace.text import safe_text
from .errors import handle_errors


@click.group()
def cache() -> None:
    """Parse and analysis caches under $TAXBREAK_CACHE_DIR (cap $TAXBREAK_CACHE_MAX_BYTES)."""


@cache.command("info")
@handle_errors
def info() -> None:
    """Where the caches are, how many entries they hold and their size."""
    from ..readers.cache import cache_stats, max_cache_bytes  # pyarrow: only when the command runs

    stats = cache_stats()
    click.echo(f"{safe_text(stats.root)}\t{stats.entries} entries\t{stats.size_bytes / 1e6:.1f} MB"
               f"\tcap {max_cache_bytes() / 1024**3:.1f} GiB")


@cache.command("clear")
@handle_errors
def clear() -> None:
    """Remove every cache entry (traces are parsed and analyzed again on next use)."""
    from ..readers.cache import clear_cache

    removed = clear_cache()
    click.echo(f"removed {removed.entries} entries ({removed.size_bytes / 1e6:.1f} MB) from {safe_text(removed.root)}", err=True)
