"""The fuzz loop: mutate, run each case in a forked child, tally, keep unique failures."""
from __future__ import annotations

import hashlib
import json
import random
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from harness import Outcome, preload, run_case
from mutators import MUTATORS, PENDING, Mutator, base_traces


@dataclass
class Report:
    seed: int
    cases: int = 0
    seconds: float = 0.0
    by_mutator: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    unique: dict[str, dict] = field(default_factory=dict)  # signature -> first case and count

    @property
    def failures(self) -> int:
        return sum(u["count"] for u in self.unique.values())

    def as_dict(self) -> dict:
        return {"seed": self.seed, "cases": self.cases, "seconds": round(self.seconds, 2),
                "cases_per_s": round(self.cases / self.seconds, 2) if self.seconds else None,
                "failures": self.failures, "unique_failures": len(self.unique),
                "by_mutator": {m: dict(c) for m, c in sorted(self.by_mutator.items())},
                "unique": self.unique}


def choose(names: list[str] | None, skip_pending: bool) -> list[Mutator]:
    chosen = [m for m in MUTATORS if (names is None or m.name in names)]
    return [m for m in chosen if not (skip_pending and m.name in PENDING)]


def fuzz(mutators: list[Mutator], seed: int = 0, seconds: float = 60.0, max_cases: int | None = None,
         out_dir: Path | None = None, timeout_s: float = 20.0, memory_bytes: int = 2 * 1024**3) -> Report:
    """Round-robin over ``mutators`` until ``seconds`` pass or ``max_cases`` ran.

    Case ``i`` draws from ``random.Random(f"{seed}:{i}")``: a case is reproduced
    from (seed, i) alone, whatever ran before it.
    """
    preload()
    report = Report(seed)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="taxbreak-fuzz-") as tmp:
        folder = Path(tmp)
        bases = base_traces(folder)
        i = 0
        while time.monotonic() - started < seconds and (max_cases is None or i < max_cases):
            mutator = mutators[i % len(mutators)]
            data = mutator.fn(random.Random(f"{seed}:{i}"), bases[mutator.fmt])
            path = folder / f"case{mutator.suffix}"
            path.write_bytes(data)
            outcome = run_case(path, timeout_s, memory_bytes)
            report.by_mutator[mutator.name][outcome.kind] += 1
            if outcome.failed:
                _record(report, mutator, i, data, outcome, out_dir)
            i += 1
        report.cases = i
    report.seconds = time.monotonic() - started
    return report


def _record(report: Report, mutator: Mutator, index: int, data: bytes, outcome: Outcome,
            out_dir: Path | None) -> None:
    signature = f"{mutator.name}|{outcome.signature}"
    if signature in report.unique:
        report.unique[signature]["count"] += 1
        return
    name = hashlib.sha256(signature.encode()).hexdigest()[:12]
    report.unique[signature] = {"mutator": mutator.name, "kind": outcome.kind, "detail": outcome.detail,
                                "where": outcome.where, "case": index, "count": 1, "bytes": len(data),
                                "file": f"{name}{mutator.suffix}" if out_dir else None}
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / f"{name}{mutator.suffix}").write_bytes(data)
        (out_dir / f"{name}.json").write_text(json.dumps({"signature": signature, "seed": report.seed,
                                                          **report.unique[signature]}, indent=1))
