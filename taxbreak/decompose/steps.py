"""Steps and phases: which marker ranges delimit inference steps.

Schemes, tried in this order (the first that matches any range wins):

1. the caller's ``step_pattern`` regex (named group ``phase`` optional, else ``unknown``);
2. taxbreak's own ``taxbreak/<prefill|decode|mixed>/<i>`` ranges;
3. vLLM ``execute_<n>_context_<c>(…)_generation_<g>(…)``: c>0, g=0 → prefill;
   c=0, g>0 → decode; both → mixed;
4. SGLang ``step[EXTEND …]`` → prefill, ``step[DECODE …]`` → decode;
5. ``ProfilerStep#N`` → phase ``unknown``.

Markers are read from Kineto ``user_annotation`` host events, else from NVTX
ranges. A time belongs to the latest-starting step that contains it; times
outside every step belong to step ``-1`` named ``between`` (phase ``between``).
No markers at all: the whole trace is one step ``0`` (phase ``unknown``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..trace.diagnostics import Diagnostics
from ..trace.errors import UsageError
from .views import Views

BETWEEN = -1
BETWEEN_NAME = "between"
TAXBREAK_STEP = re.compile(r"^taxbreak/(?P<phase>prefill|decode|mixed)/(?P<i>\d+)$")
TAXBREAK_RUN = re.compile(r"^taxbreak/run/")
# vLLM: execute_<n>_context_<c>(…)_generation_<g>(…) (older) and execute_context_<c>(…)_generation_<g>(…)
VLLM_STEP = re.compile(r"^execute_(?:\d+_)?context_(?P<c>\d+)\(.*\)_generation_(?P<g>\d+)\(")
SGLANG_STEP = re.compile(r"^step\[(?P<mode>DECODE|EXTEND|MIXED|PREFILL)\b")
SGLANG_PHASE = {"DECODE": "decode", "EXTEND": "prefill", "PREFILL": "prefill", "MIXED": "mixed"}
# names that look like a serving engine's step markers: counted when none of them became a step
ENGINE_MARKER = re.compile(r"^(?:execute_|step\[)")
PROFILER_STEP = re.compile(r"^ProfilerStep#\d+$")


@dataclass
class Steps:
    """Step table (``step``, ``phase``, ``name``, ``start_ns``, ``end_ns``), sorted by start."""

    table: pd.DataFrame
    scheme: str  # "pattern" | "taxbreak" | "vllm" | "sglang" | "profiler_step" | "none"
    runs: int  # number of taxbreak/run ranges (0 when absent)

    def assign(self, t_ns: np.ndarray) -> np.ndarray:
        """Step id of each time (``-1`` = between steps)."""
        starts = self.table["start_ns"].to_numpy(np.int64)
        ends = self.table["end_ns"].to_numpy(np.int64)
        ids = self.table["step"].to_numpy(np.int64)
        t = np.asarray(t_ns, np.int64)
        pos = np.searchsorted(starts, t, side="right") - 1
        ok = pos >= 0
        ok[ok] = t[ok] < ends[pos[ok]]
        return np.where(ok, ids[np.maximum(pos, 0)], BETWEEN) if len(starts) else np.full(len(t), BETWEEN)


def compile_pattern(step_pattern: str | None) -> re.Pattern | None:
    """Compile the user's step regex, or raise ``UsageError`` (``usage.step_pattern``)."""
    if step_pattern is None:
        return None
    try:
        return re.compile(step_pattern)
    except re.error as err:
        raise UsageError("usage.step_pattern", f"--step-pattern does not compile: {err}",
                         location=f"position {err.pos}",
                         hint="give a Python regex, e.g. 'iter_(?P<phase>\\w+)'") from err


def marker_candidates(views: Views, nvtx_names: np.ndarray, nvtx_start: np.ndarray,
                      nvtx_end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(name, start, end) of ranges that may be step markers: annotations, else NVTX."""
    host = views.host
    ann = np.flatnonzero(host.kind_is("annotation"))
    if len(ann):
        return host.names(ann), host.start_ns[ann], host.end_ns[ann]
    return nvtx_names, nvtx_start, nvtx_end


def find_steps(names: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray,
               pattern: re.Pattern | None, span: tuple[int, int], diags: Diagnostics) -> Steps:
    """Detect the step scheme and build the step table (see module docstring)."""
    unique_names = pd.unique(names)  # classify each distinct name once, not each event
    runs = int(sum(1 for n in set(unique_names.tolist()) if TAXBREAK_RUN.match(n)))
    for scheme, labeler in _schemes(pattern):
        phase_of = {n: p for n in unique_names if (p := labeler(n)) is not None}
        if phase_of:
            _count_unmatched_engine_markers(unique_names, scheme, diags)
            return Steps(_table(names, start_ns, end_ns, phase_of), scheme, runs)
    _count_unmatched_engine_markers(unique_names, "none", diags)
    diags.add("decompose.no_steps", 1, "no step markers; the whole trace is one step")
    whole = pd.DataFrame({"step": [0], "phase": ["unknown"], "name": ["trace"],
                          "start_ns": [span[0]], "end_ns": [span[1]]})
    return Steps(whole, "none", runs)


def _count_unmatched_engine_markers(unique_names, scheme: str, diags: Diagnostics) -> None:
    """A serving engine's markers exist but the steps came from no engine scheme: say so."""
    if scheme in ("vllm", "sglang", "pattern"):
        return
    unmatched = [n for n in unique_names.tolist() if ENGINE_MARKER.match(n)]
    if unmatched:
        diags.add("decompose.engine_markers_unmatched", len(unmatched),
                  f"serving-engine-like step markers matched no known form (e.g. {unmatched[0][:60]!r}); "
                  "pass --step-pattern")


def _table(names, start_ns, end_ns, phase_of: dict) -> pd.DataFrame:
    hit = _isin(names, phase_of.keys())
    df = pd.DataFrame({"name": names[hit], "start_ns": start_ns[hit], "end_ns": end_ns[hit]})
    # a marker written both as annotation and NVTX, or twice, counts once
    df = df.drop_duplicates(["name", "start_ns", "end_ns"]).sort_values(["start_ns", "end_ns"], kind="stable")
    df.insert(0, "phase", df["name"].map(phase_of))
    df.insert(0, "step", np.arange(len(df), dtype=np.int64))
    return df.reset_index(drop=True)


def _schemes(pattern: re.Pattern | None):
    if pattern is not None:
        yield "pattern", lambda n: _pattern_phase(pattern, n)
    yield "taxbreak", lambda n: (m.group("phase") if (m := TAXBREAK_STEP.match(n)) else None)
    yield "vllm", _vllm_phase
    yield "sglang", lambda n: SGLANG_PHASE[m.group("mode")] if (m := SGLANG_STEP.match(n)) else None
    yield "profiler_step", lambda n: "unknown" if PROFILER_STEP.match(n) else None


def _pattern_phase(pattern: re.Pattern, name: str) -> str | None:
    m = pattern.search(name)
    if m is None:
        return None
    return (m.groupdict().get("phase") or "unknown") if "phase" in pattern.groupindex else "unknown"


def _vllm_phase(name: str) -> str | None:
    m = VLLM_STEP.match(name)
    if m is None:
        return None
    context, generation = int(m.group("c")), int(m.group("g"))
    if context and generation:
        return "mixed"
    return "prefill" if context else ("decode" if generation else "unknown")


def is_marker(views: Views, pattern: re.Pattern | None) -> np.ndarray:
    """Host annotations that are step or run markers (excluded from torch-level ops)."""
    host = views.host
    out = np.zeros(len(host.start_ns), dtype=bool)
    ann = np.flatnonzero(host.kind_is("annotation"))
    names = host.names(ann)
    unique = pd.unique(names)
    marks = {n for n in unique if TAXBREAK_RUN.match(n) or any(lab(n) is not None for _, lab in _schemes(pattern))}
    out[ann] = _isin(names, marks)
    return out


def _isin(names: np.ndarray, values) -> np.ndarray:
    """``names`` (object array) in ``values``, hashed as objects: a default pandas
    Series would first convert millions of names to Arrow strings (4x slower)."""
    return pd.Series(names, dtype=object).isin(list(values)).to_numpy(bool)
