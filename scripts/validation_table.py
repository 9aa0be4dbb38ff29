#!/usr/bin/env python
"""Validation against the published TaxBreak figures (used by scripts/gpu_validate.sh).

    validation_table.py collect OUT_DIR        # OUT_DIR/{floor.json,runs/*,replay.json,stages.jsonl} -> validation.json
    validation_table.py trim TRACE [--max-mb 5] # shrink a Kineto .json.gz in place (keeps one run, then fewer steps)
    validation_table.py OUT_DIR                # markdown table of validation.json vs the published figures

A developer tool: it reads what the script measured and never invents a value;
anything not measured is shown as "—" (JSON null) with the stage status.
"""
from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

# Published figures (TaxBreak, arXiv 2603.12465; see docs/validation.md for sources).
PUBLISHED = {
    "t_sys_us": {"H200": 4.50, "H100": 4.71},
    # kernels per decode pass (one generate: prefill + 9 decode steps) at BS 4, SL 2048, 10 new tokens
    "kernels_per_pass": {"llama-3.2-1b": 8475, "olmoe-1b-7b": 93053, "qwen1.5-moe-a2.7b": 66951},
    "hdbi": {
        ("dense", "prefill"): (0.37, 0.41, "≈ 0.37–0.41"),
        ("dense", "decode"): (0.22, 0.24, "≈ 0.23"),
        ("moe", "prefill"): (0.14, 0.16, "≈ 0.15"),
        ("moe", "decode"): (None, 0.15, "< 0.15"),
    },
    # abstract: 8–11x; the published counts give 7.9x (Qwen) and 11.0x (OLMoE)
    "moe_kernel_ratio": (7.5, 11.5, "8–11x"),
}
MODELS = ("llama-3.2-1b", "olmoe-1b-7b", "qwen1.5-moe-a2.7b")
MOE = {"olmoe-1b-7b", "qwen1.5-moe-a2.7b"}


# --- collect ------------------------------------------------------------------

def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _stages(out_dir: Path) -> dict:
    stages = {}
    path = out_dir / "stages.jsonl"
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                stages[row["stage"]] = row
    return stages


def _per(value, divisor):
    return None if value is None or not divisor else value / divisor


def model_metrics(run_dir: Path) -> dict | None:
    """Kernels per pass and per token, HDBI per phase, from a run's manifest and summary."""
    manifest, summary = _read_json(run_dir / "manifest.json"), _read_json(run_dir / "summary.json")
    if not manifest or not summary:
        return None
    runs, tokens = manifest.get("runs"), manifest.get("new_tokens")
    kernels = (summary.get("all") or {}).get("kernels")
    per_pass = _per(kernels, runs)
    phases = summary.get("phases") or {}
    return {
        "run_dir": run_dir.name, "runs": runs, "new_tokens": tokens, "batch_size": manifest.get("batch_size"),
        "seq_len": manifest.get("seq_len"), "dtype": manifest.get("dtype"), "gpu_name": manifest.get("gpu_name"),
        "kernels_total": kernels, "kernels_per_pass": per_pass, "kernels_per_token": _per(per_pass, tokens),
        "hdbi": {phase: (phases.get(phase) or {}).get("hdbi") for phase in ("prefill", "decode")},
        "hdbi_all": (summary.get("all") or {}).get("hdbi"),
        "floor_us": (summary.get("all") or {}).get("floor_us"),
        "floor_source": (summary.get("all") or {}).get("floor_source"),
        "trace_trimmed": manifest.get("trace_trimmed") or _read_json(run_dir / "trimmed.json"),
    }


def collect(out_dir: Path) -> dict:
    """Build validation.json from what gpu_validate.sh left in ``out_dir``."""
    floor = _read_json(out_dir / "floor.json")
    floor = floor[0] if isinstance(floor, list) and floor else None
    models = {m: model_metrics(out_dir / "runs" / m) for m in MODELS if (out_dir / "runs" / m).is_dir()}
    replay = _read_json(out_dir / "replay.json")
    data = {
        "created_utc": datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
        "stages": _stages(out_dir),
        "floor": floor,
        "models": models,
        "replay_summary": replay.get("summary") if isinstance(replay, dict) else None,
        "moe_kernel_ratio": _ratio(models),
    }
    (out_dir / "validation.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return data


def _ratio(models: dict) -> dict:
    dense = (models.get("llama-3.2-1b") or {}).get("kernels_per_pass")
    return {m: _per((models.get(m) or {}).get("kernels_per_pass"), dense) for m in MOE}


# --- trim ---------------------------------------------------------------------

GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "ac2g"}


def _window_events(events: list, start_us: float, end_us: float) -> list:
    """Metadata, host events that start inside [start, end], and the GPU events
    (and flows) whose correlation belongs to a kept host launch — GPU work lags
    its launch, so a time window alone would cut kernels off or keep strays."""
    def inside(ev):
        ts = ev.get("ts")
        return isinstance(ts, (int, float)) and start_us <= float(ts) <= end_us

    host = [ev for ev in events if ev.get("ph") != "M" and ev.get("cat") not in GPU_CATEGORIES and inside(ev)]
    corr = {ev.get("args", {}).get("correlation") for ev in host} - {None}
    keep = [ev for ev in events if ev.get("ph") == "M"] + host
    for ev in events:
        if ev.get("cat") not in GPU_CATEGORIES:
            continue
        key = ev.get("args", {}).get("correlation", ev.get("id"))
        if key in corr or (ev.get("cat") == "gpu_user_annotation" and inside(ev)):
            keep.append(ev)
    return keep


def _marker_windows(events: list, pattern: str) -> list[tuple[str, float, float]]:
    rx = re.compile(pattern)
    found = [(ev["name"], float(ev["ts"]), float(ev["ts"]) + float(ev.get("dur", 0))) for ev in events
             if ev.get("cat") == "user_annotation" and rx.fullmatch(str(ev.get("name", "")))]
    return sorted(found, key=lambda w: w[1])


def trim(trace: Path, max_mb: float = 5.0) -> dict:
    """Shrink a gzipped Kineto trace below ``max_mb``: keep the last run, then its prefill and fewer decode steps."""
    data = json.loads(gzip.decompress(trace.read_bytes()))
    events = data.get("traceEvents", [])
    original = len(events)
    runs = _marker_windows(events, r"taxbreak/run/\d+")
    note = {"original_events": original, "kept": "whole trace"}
    if runs:
        _, r0, r1 = runs[-1]
        steps = [w for w in _marker_windows(events, r"taxbreak/(prefill|decode|mixed)/\d+") if r0 <= w[1] <= r1]
        candidates = [(f"run {runs[-1][0]}", r0, r1)]
        for n in range(len(steps) - 1, 0, -1):
            candidates.append((f"first {n} steps of {runs[-1][0]}", steps[0][1], steps[n - 1][2]))
        for label, start, end in candidates:
            data["traceEvents"] = _window_events(events, start, end)
            blob = gzip.compress(json.dumps(data).encode(), compresslevel=6)
            note = {"original_events": original, "kept": label, "events": len(data["traceEvents"]),
                    "bytes": len(blob)}
            if len(blob) <= max_mb * 1e6:
                break
        trace.write_bytes(blob)
    return note


# --- table --------------------------------------------------------------------

def _fmt(value, digits=2) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _plain(value) -> str:
    return "—" if value is None else str(value)


def _within(value, low, high) -> str:
    if value is None:
        return "not measured"
    ok = (low is None or value >= low) and (high is None or value <= high)
    return "within" if ok else "outside"


def table(data: dict) -> str:
    """The markdown table of docs/validation.md, filled from validation.json."""
    lines = ["| quantity | published | measured | note |", "|---|---|---|---|"]
    floor = data.get("floor") or {}
    gpu = str(floor.get("gpu_name") or "")
    ref = next((v for k, v in PUBLISHED["t_sys_us"].items() if k in gpu.upper()), None)
    mean = floor.get("floor_us")
    delta = "" if ref is None or mean is None else f", {100 * (mean / ref - 1):+.1f}% vs published"
    lines.append(f"| T_sys null-kernel floor, µs ({gpu or 'GPU'}) | 4.50 (H200), 4.71 (H100) | "
                 f"{_fmt(mean, 3)} | p50 {_fmt(floor.get('p50_us'), 3)}, p95 "
                 f"{_fmt(floor.get('p95_us'), 3)}, n={_fmt(floor.get('samples'))}{delta} |")
    models = data.get("models") or {}
    for model in MODELS:
        m = models.get(model) or {}
        pub = PUBLISHED["kernels_per_pass"][model]
        lines.append(f"| kernels per decode pass, {model} | ≈ {pub:,} | {_fmt(m.get('kernels_per_pass'), 1)} | "
                     f"BS {_plain(m.get('batch_size'))}, SL {_plain(m.get('seq_len'))}, {_plain(m.get('new_tokens'))} tokens |")
        lines.append(f"| kernels per output token, {model} | ≈ {pub / 10:,.1f} | {_fmt(m.get('kernels_per_token'), 1)} | |")
        kind = "moe" if model in MOE else "dense"
        for phase in ("prefill", "decode"):
            low, high, text = PUBLISHED["hdbi"][(kind, phase)]
            value = (m.get("hdbi") or {}).get(phase)
            lines.append(f"| HDBI {phase}, {model} | {text} | {_fmt(value, 3)} | {_within(value, low, high)} |")
    for model, ratio in sorted((data.get("moe_kernel_ratio") or {}).items()):
        low, high, text = PUBLISHED["moe_kernel_ratio"]
        lines.append(f"| MoE/dense kernels per pass, {model} | {text} | {_fmt(ratio, 1)} | {_within(ratio, low, high)} |")
    return "\n".join(lines) + "\n" + _stage_lines(data.get("stages") or {})


def _stage_lines(stages: dict) -> str:
    if not stages:
        return ""
    rows = [f"- `{name}`: {s.get('status')} in {s.get('seconds')} s (rc {s.get('rc')})" for name, s in stages.items()]
    return "\nStages:\n\n" + "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["collect"]:
        collect(Path(argv[1]))
        return 0
    if argv[:1] == ["trim"]:
        parser = argparse.ArgumentParser(prog="validation_table.py trim")
        parser.add_argument("trace", type=Path)
        parser.add_argument("--max-mb", type=float, default=5.0)
        args = parser.parse_args(argv[1:])
        print(json.dumps(trim(args.trace, args.max_mb)))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path)
    args = parser.parse_args(argv)
    path = args.out_dir / "validation.json"
    if not path.is_file():
        print(f"error: {path} not found (run `validation_table.py collect {args.out_dir}` first)", file=sys.stderr)
        return 1
    sys.stdout.write(table(json.loads(path.read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
