"""Cost of the cache key's content fingerprint against hashing every byte.

    python scripts/bench_fingerprint.py TRACE [TRACE ...]

Per file: size, the sampled fingerprint (taxbreak.readers.cache.content_fingerprint:
BLAKE2b of the first, middle and last 1 MiB) and full hashes of the bytes as
stored (BLAKE2b, zlib.crc32, and xxh3_64 when the xxhash package is present),
each the best of three runs with the file in the page cache. Figures in
docs/reliability.md, "Cache".
"""
from __future__ import annotations

import hashlib
import sys
import time
import zlib
from pathlib import Path

from taxbreak.readers.cache import content_fingerprint

CHUNK = 8 * 1024 * 1024


def full_hash(path: Path, update, state):
    with path.open("rb") as fh:
        while chunk := fh.read(CHUNK):
            state = update(state, chunk)
    return state


def _blake2b(path):
    digest = hashlib.blake2b(digest_size=16)
    full_hash(path, lambda d, c: (d.update(c), d)[1], digest)


def _crc32(path):
    full_hash(path, lambda s, c: zlib.crc32(c, s), 0)


def _xxh3(path):
    import xxhash

    digest = xxhash.xxh3_64()
    full_hash(path, lambda d, c: (d.update(c), d)[1], digest)


def best_of(fn, path, runs=3) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn(path)
        times.append(time.perf_counter() - start)
    return min(times)


def main(paths: list[str]) -> None:
    methods = {"sampled blake2b 3x1MiB": content_fingerprint, "full blake2b": _blake2b, "full crc32": _crc32}
    try:
        import xxhash  # noqa: F401

        methods["full xxh3_64"] = _xxh3
    except ImportError:
        pass
    for name in paths:
        path = Path(name)
        _crc32(path)  # into the page cache
        print(f"{path.name}: {path.stat().st_size / 1e6:,.1f} MB")
        for label, fn in methods.items():
            print(f"  {label:24s} {best_of(fn, path) * 1000:9.2f} ms")


if __name__ == "__main__":
    main(sys.argv[1:])
