#!/usr/bin/env python
"""Runs a (sanitizer-built) compiled Kineto scanner over fuzz inputs; see scripts/sanitize_scanner.sh.

    python scripts/sanitize_scanner.py PATH_TO_EXTENSION [--seconds N] [--seed S]

Each input is handed to ``scan_chunk`` in a buffer of exactly its size (a numpy
copy: a read one byte past the end is a heap overflow under AddressSanitizer,
where a ``bytes`` object would hide it behind its trailing NUL). Inputs: the
cases of every Kineto mutator class of tests/fuzz (their ``traceEvents``
array, the whole text and a one-event chunk), every prefix of the short ones,
random cuts and byte flips, and deep nesting in each field. Prints one JSON
line with the counts; a sanitizer report aborts the process.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "fuzz"))

from mutators import EXTREME_NUMBERS, MUTATORS, ODD_STRINGS, OTHER_TYPES  # noqa: E402

NUMBER_CHARS = 64
MAX_DEPTH = 898
PREFIX_BYTES = 3000  # inputs up to this size are also scanned at every prefix
INFLATE_CAP = 64 << 20


def load(path: Path):
    spec = importlib.util.spec_from_file_location("_kineto_scan", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Runner:
    def __init__(self, module) -> None:
        self.module = module
        self.scans = 0
        self.accepted = 0

    def scan(self, data: bytes) -> None:
        exact = np.frombuffer(data, dtype=np.uint8).copy() if data else np.zeros(0, dtype=np.uint8)
        found = self.module.scan_chunk(exact, NUMBER_CHARS, MAX_DEPTH)
        self.scans += 1
        if found is not None:
            n, rows, strings = found
            assert len(rows) == n * 8 * self.module.N_COLS
            self.accepted += 1

    def variants(self, data: bytes, rng: random.Random) -> None:
        self.scan(data)
        if len(data) <= PREFIX_BYTES:
            for cut in range(len(data)):
                self.scan(data[:cut])
        for _ in range(8):
            self.scan(data[: rng.randrange(len(data) + 1)])
            flipped = bytearray(data)
            for _ in range(rng.randint(1, 4)):
                if flipped:
                    flipped[rng.randrange(len(flipped))] = rng.randrange(256)
            self.scan(bytes(flipped))


def inflate(data: bytes) -> bytes:
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data, INFLATE_CAP)
    except zlib.error:
        return data


def chunks_of(text: bytes) -> list[bytes]:
    """The events array of a case, its first event alone, and the whole text."""
    start = text.find(b"[")
    end = text.rfind(b"]")
    out = [text]
    if 0 <= start < end:
        out.append(text[start: end + 1])
        first_end = text.find(b"},", start)
        if first_end > start:
            out.append(b"[" + text[start + 1: first_end + 1] + b"]")
    return out


def planted_inputs() -> list[bytes]:
    """One event per odd value in each field the scanner reads, and deep nesting."""
    base = ('{"ph":"X","cat":"kernel","name":"k","pid":1,"tid":2,"ts":%s,"dur":%s,'
            '"args":{"device":%s,"grid":%s,"Input Dims":%s,"name":%s}}')
    values = list(EXTREME_NUMBERS) + list(OTHER_TYPES) + [json.dumps(s) for s in ODD_STRINGS]
    out = []
    for value in values:
        out.append(("[" + base % (value, value, value, value, value, value) + "]").encode())
    for depth in (1, 50, 127, 128, 129, 200, 2000):
        nest = "[" * depth + "]" * depth
        obj = '{"a":' * depth + "1" + "}" * depth
        out.append(("[" + base % ("1", "1", "0", "[1,2,3]", nest, obj) + "]").encode())
        out.append(("[" + nest + "]").encode())
    out.append(b'["\\ud800"]')
    out.append(b'[{"name":"\\u00"}]')
    out.append(b'[{"name":"\xed\xa0\x80"}]')
    out.append(b'[{"name":"\xf4\x90\x80\x80"}]')
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("extension", type=Path)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--seed", type=int, default=20261207)
    args = parser.parse_args()
    runner = Runner(load(args.extension))
    rng = random.Random(args.seed)
    started = time.monotonic()
    for data in planted_inputs():
        runner.variants(data, rng)
    from taxbreak.synth.bigtrace import write_big_kineto
    with tempfile.TemporaryDirectory() as tmp:
        base = write_big_kineto(Path(tmp) / "base.json", 400, gzip=False, layers=2, decode_steps=2).path
        doc = json.loads(base.read_text())
        for chunk in chunks_of(base.read_bytes()):
            runner.variants(chunk, rng)
    kineto = [m for m in MUTATORS if m.fmt == "kineto"]
    cases = 0
    while cases < len(kineto) or time.monotonic() - started < args.seconds:  # every class at least once
        mutator = kineto[cases % len(kineto)]
        text = mutator.fn(rng, doc)
        if mutator.suffix.endswith(".gz"):
            text = inflate(text)
        for chunk in chunks_of(text):
            runner.variants(chunk, rng)
        cases += 1
    print(json.dumps({"mutator_cases": cases, "mutator_classes": len(kineto), "scans": runner.scans,
                      "accepted": runner.accepted, "seconds": round(time.monotonic() - started, 1)}))


if __name__ == "__main__":
    main()
