"""Profile a (batch size × sequence length) grid, and mixed steps, into one sweep directory.

```
SWEEP_DIR/sweep.json          index: config, every point (status, run dir), transition point
SWEEP_DIR/b<B>-s<S>/          run directory of one grid point (prefill + decode)
SWEEP_DIR/m<r>-s<S>/          run directory of one mixed point (decode share r, S tokens per step)
SWEEP_DIR/<run>/sweep_point.json   the point spec the run was made with (resumability)
SWEEP_DIR/table.csv           one row per (point, phase) (written by taxbreak.whatif.sweep_report)
SWEEP_DIR/plots/*.svg, SWEEP_DIR/sweep.html
```

A point is *complete* when its ``sweep_point.json`` equals the spec asked for
now and its ``summary.json`` exists; a complete point is never re-profiled,
so an interrupted sweep resumes where it stopped and a finished one reruns
nothing.
"""
from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from ..trace.errors import TaxbreakError, UsageError
from ..trace.fileio import write_output

log = logging.getLogger(__name__)

INDEX = "sweep.json"
POINT_SPEC = "sweep_point.json"
INDEX_VERSION = 1


@dataclass
class SweepConfig:
    """The grid and how each point is profiled (fields as ``taxbreak profile``)."""

    model: str
    batch_sizes: list[int]
    seq_lens: list[int]
    new_tokens: int = 10
    tiny: bool | None = None
    device: str | None = None
    dtype: str | None = None
    warmup: int = 2
    runs: int = 3
    mixed_shares: list[float] = field(default_factory=list)
    mixed_decode_context: int = 64
    seed: int = 0

    def validate(self) -> None:
        """Raise ``usage.invalid`` for an empty grid or a value out of range."""
        if not self.batch_sizes or not self.seq_lens:
            raise UsageError("usage.invalid", "the grid needs at least one batch size and one sequence length")
        if min(self.batch_sizes) < 1 or min(self.seq_lens) < 1 or self.new_tokens < 1:
            raise UsageError("usage.invalid", "batch sizes, sequence lengths and new tokens must be >= 1")
        if any(not 0.0 <= r <= 1.0 for r in self.mixed_shares):
            raise UsageError("usage.invalid", f"mixed shares must lie in [0, 1], got {self.mixed_shares}")


@dataclass(frozen=True)
class Point:
    """One grid point: ``kind`` grid (batch × seq_len) or mixed (share × seq_len tokens)."""

    kind: str
    batch: int
    seq_len: int
    decode_share: float | None = None

    @property
    def name(self) -> str:
        if self.kind == "mixed":
            return f"m{self.decode_share:g}-s{self.seq_len}"
        return f"b{self.batch}-s{self.seq_len}"


@dataclass
class PointResult:
    point: Point
    run_dir: Path
    status: str  # profiled | reused | failed
    error: str | None = None


@dataclass
class SweepResult:
    sweep_dir: Path
    points: list[PointResult]
    index: dict

    @property
    def profiled(self) -> int:
        return sum(p.status == "profiled" for p in self.points)

    @property
    def failed(self) -> list[PointResult]:
        return [p for p in self.points if p.status == "failed"]


def grid_points(config: SweepConfig) -> list[Point]:
    """Every point of the sweep in run order: the grid (B, then S), then the mixed points."""
    points = [Point("grid", b, s) for s in sorted(set(config.seq_lens)) for b in sorted(set(config.batch_sizes))]
    points += [Point("mixed", 1, s, r) for s in sorted(set(config.seq_lens)) for r in sorted(set(config.mixed_shares))]
    return points


def point_spec(config: SweepConfig, point: Point) -> dict:
    """What a point's run depends on; a run made with another spec is stale."""
    spec = {k: v for k, v in asdict(config).items() if k not in ("batch_sizes", "seq_lens", "mixed_shares")}
    if point.kind == "grid":
        spec.pop("mixed_decode_context")
    return {**spec, **asdict(point)}


def is_complete(run_dir: Path, spec: dict) -> bool:
    """True when ``run_dir`` was profiled with ``spec`` and its summary was written."""
    try:
        saved = json.loads((run_dir / POINT_SPEC).read_text())
    except (OSError, ValueError):
        return False
    return saved == spec and (run_dir / "summary.json").is_file()


Progress = Callable[[int, int, str, str], None]  # (done, total, point name, status)


def run_sweep(config: SweepConfig, sweep_dir: str | Path, progress: Progress | None = None,
              profile_point: Callable | None = None) -> SweepResult:
    """Profile every point not yet complete; write ``sweep.json`` after each point.

    Args:
        config: the grid.
        sweep_dir: the sweep directory (created).
        progress: called as ``progress(done, total, name, status)`` once before
            the first point (status ``start``) and after every point.
        profile_point: ``(config, point, run_dir) -> None``; default profiles
            through :mod:`taxbreak.capture`. Tests pass their own.

    Returns:
        :class:`SweepResult`. A point that fails is recorded with its error and
        the sweep goes on; the caller decides what a failure means.
    """
    config.validate()
    if profile_point is None:
        preflight(config)
    root = Path(sweep_dir)
    root.mkdir(parents=True, exist_ok=True)
    points = grid_points(config)
    report = progress or (lambda *args: None)
    profile_fn = profile_point or profile_one
    report(0, len(points), "", "start")
    results: list[PointResult] = []
    for i, point in enumerate(points):
        results.append(_run_point(config, point, root, profile_fn))
        write_index(root, config, results)
        report(i + 1, len(points), point.name, results[-1].status)
    return SweepResult(root, results, read_index(root))


def _run_point(config: SweepConfig, point: Point, root: Path, profile_fn: Callable) -> PointResult:
    run_dir = root / point.name
    spec = point_spec(config, point)
    if is_complete(run_dir, spec):
        return PointResult(point, run_dir, "reused")
    (run_dir / POINT_SPEC).unlink(missing_ok=True)
    try:
        profile_fn(config, point, run_dir)
    except TaxbreakError as err:
        return PointResult(point, run_dir, "failed", err.one_line())
    if not (run_dir / "summary.json").is_file():
        return PointResult(point, run_dir, "failed", _missing_summary_reason(run_dir))
    _write_json(run_dir / POINT_SPEC, spec)
    return PointResult(point, run_dir, "profiled")


def _missing_summary_reason(run_dir: Path) -> str:
    try:
        outputs = json.loads((run_dir / "manifest.json").read_text()).get("outputs", {})
        return f"no summary.json: {outputs.get('analysis', 'unknown')}"
    except (OSError, ValueError):
        return "no summary.json and no readable manifest.json"


def preflight(config: SweepConfig) -> None:
    """Fail once, before any point, on what would fail every point (unknown model, no CUDA)."""
    from ..capture.models import resolve_spec

    _profile_config(config, grid_points(config)[0]).resolved()
    if not config.model.startswith("hf:"):
        resolve_spec(config.model, tiny=bool(config.tiny))


def _profile_config(config: SweepConfig, point: Point):
    from ..capture.runner import ProfileConfig

    return ProfileConfig(
        model=config.model, batch_size=point.batch, seq_len=point.seq_len, new_tokens=config.new_tokens,
        warmup=config.warmup, runs=config.runs, dtype=config.dtype, device=config.device, tiny=config.tiny,
        seed=config.seed, command_line=["taxbreak", "sweep", point.name],
    )


def profile_one(config: SweepConfig, point: Point, run_dir: Path) -> None:
    """Profile one point through the capture layer (prefill + decode, or mixed steps)."""
    from ..capture.runner import profile

    base = _profile_config(config, point)
    if point.kind == "grid":
        profile(base, out_dir=run_dir)
        return
    from ..capture.mixed import MixedConfig, profile_mixed

    mixed = MixedConfig(decode_share=point.decode_share, tokens=point.seq_len,
                        decode_context=config.mixed_decode_context)
    profile_mixed(base, mixed, out_dir=run_dir)


def write_index(root: Path, config: SweepConfig, results: list[PointResult], extra: dict | None = None) -> None:
    """Write ``sweep.json`` (atomically: a reader never sees half a file)."""
    previous = read_index(root) if (root / INDEX).is_file() else {}
    index = {
        "version": INDEX_VERSION,
        "config": asdict(config),
        "points": [
            {**asdict(r.point), "name": r.point.name, "run_dir": r.run_dir.name, "status": r.status, "error": r.error}
            for r in results
        ],
        **{k: v for k, v in previous.items() if k not in ("version", "config", "points")},
        **(extra or {}),
    }
    _write_json(root / INDEX, index)


def read_index(root: str | Path) -> dict:
    """``sweep.json`` of a sweep directory.

    Raises:
        TaxbreakError: ``run.not_a_run`` without ``sweep.json``; ``json.invalid`` when unreadable.
    """
    from ..trace.errors import TraceFormatError, TraceNotFoundError

    path = Path(root) / INDEX
    if not path.is_file():
        raise TraceNotFoundError("run.not_a_run", "no sweep.json in the directory", path=str(root),
                                 hint="run `taxbreak sweep ... -o DIR` first")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise TraceFormatError("json.invalid", f"sweep.json is not valid JSON: {err}", path=str(path)) from err


def _write_json(path: Path, data: dict) -> None:
    write_output(path, json.dumps(data, indent=1, default=str) + "\n")  # atomic, never through a link
