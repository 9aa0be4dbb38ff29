"""Combine the summaries of many traces (ranks or runs) into one.

Additive metrics (times spent in µs, counts) are summed; times of one rank's clock
(``wall_us``, ``span_us``, ``host_thread_us``) become rank-time. Ratios are recomputed from
the sums, never averaged: HDBI = ΣT_DeviceActive / (ΣT_DeviceActive + ΣT_Orchestrate)
("paper Eq.3", docs/method.md), ``chain_coverage`` = Σ fully chained kernels / Σ kernels, and
each ``X_per_token`` = ΣX / Σtokens. ``idle_by_cause_us`` is summed cause by cause; ``devices``
keeps every trace's devices apart, keyed ``<trace label>/<device>`` (device 0 of two ranks is
two GPUs). Quantiles (``queue_wait_median_us``, ``queue_wait_p99_us``) and the union of waiting
intervals (``queue_wait_union_us``) are ``None``: neither follows from per-trace values (the
union of two ranks' waits is not their sum; the per-trace values are in the files' summaries
and the dataset). Per-trace constants (``floor_us``, ``floor_source``, ``t_dispatch_base_us``)
are kept when every trace agrees and are ``None`` otherwise. A metric that is
``None`` (not measured) in any trace is ``None`` in the combination, with the
reason in ``unmeasured``: a partial sum would look like a measurement. ``hdbi_reason`` is
``None`` when the combined HDBI is measured, else why not.

Example (two ranks)::

    rank  device_active_us  orchestration_us  hdbi
    0     300               100               0.750
    1     100               100               0.500
    all   400               200               0.667   (the mean of the two HDBIs, 0.625, would be wrong)
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..trace.words import plural

DEVICE_KEY = "device_active_us"
ORCH_KEY = "orchestration_us"
TOKENS_KEY = "tokens"
PER_TOKEN_SUFFIX = "_per_token"
# The same for every trace of one machine/run, or a ratio: not summed.
CONSTANT_KEYS = frozenset({"floor_us", "floor_source", "t_dispatch_base_us"})
RATIO_KEYS = frozenset({"hdbi", "kernel_diversity", "chain_coverage"})
# Not additive: a quantile or a union of intervals of one trace says nothing about the sum.
NOT_ADDITIVE = {"queue_wait_median_us": "a quantile of one trace's waits cannot be combined from summaries",
                "queue_wait_p99_us": "a quantile of one trace's waits cannot be combined from summaries",
                "queue_wait_union_us": "a union of one trace's waiting intervals is not additive across traces"}
IDLE_KEY, DEVICES_KEY, REASON_KEY = "idle_by_cause_us", "devices", "hdbi_reason"
KERNELS_KEY, COVERAGE_KEY = "kernels", "chain_coverage"
# ΔFT, ΔCT and the two HDBI terms: unmeasured in one trace, the combined HDBI is unmeasured.
COMPONENT_KEYS = ("framework_us", "library_us", DEVICE_KEY, ORCH_KEY)


def combine_metrics(dicts: list[Mapping], labels: list[str] | None = None) -> tuple[dict, dict[str, str]]:
    """One summary metric dict from several (same keys, µs unless named otherwise).

    Args:
        dicts: per-trace metric dicts (``Analysis.summary["all"]`` or one phase).
        labels: one name per trace for the keys of ``devices`` (default: the position).

    Returns:
        ``(combined, unmeasured)``: the combined dict and, for each key that is
        ``None`` in it, why.
    """
    keys = _ordered_keys(dicts)
    combined: dict = {}
    unmeasured: dict[str, str] = {}
    labels = labels if labels is not None else [str(i) for i in range(len(dicts))]
    for key in keys:
        values = [d.get(key) for d in dicts]
        if key in RATIO_KEYS or key.endswith(PER_TOKEN_SUFFIX) or key == REASON_KEY:
            continue  # derived below from the sums
        if key in NOT_ADDITIVE:
            combined[key], unmeasured[key] = None, NOT_ADDITIVE[key]
            continue
        if key in (IDLE_KEY, DEVICES_KEY):
            combined[key], reason = (_sum_by_cause(values) if key == IDLE_KEY else _devices(values, labels))
            if reason:
                unmeasured[key] = reason
            continue
        if key in CONSTANT_KEYS or any(isinstance(v, str) for v in values):
            combined[key] = _agreed(values)
            if combined[key] is None:
                unmeasured[key] = "differs between traces" if any(v is not None for v in values) else "not measured"
            continue
        combined[key], reason = _sum(values)
        if reason:
            unmeasured[key] = reason
    _derive_ratios(keys, combined, unmeasured)
    _chain_coverage(dicts, keys, combined, unmeasured)
    _null_hdbi_where_a_component_is_unmeasured(dicts, combined, unmeasured)
    if REASON_KEY in keys:
        combined[REASON_KEY] = unmeasured.get("hdbi") if combined.get("hdbi") is None else None
    return {key: combined.get(key) for key in keys}, unmeasured


def _sum_by_cause(values: list) -> tuple[dict | None, str]:
    """``{cause: Σ µs}`` over traces; None when one trace has no idle attribution."""
    missing = sum(not isinstance(v, Mapping) for v in values)
    if missing or not values:
        return None, f"not measured in {missing} of {plural(len(values), 'trace')}"
    causes = _ordered_keys(values)
    sums = {c: _sum([v.get(c) for v in values]) for c in causes}
    # a cause not observable in one trace (the library cause without library ranges) is None
    # in the combination; the causes measured everywhere are still summed
    unmeasured = [c for c, (_, reason) in sums.items() if reason]
    return ({c: total for c, (total, _) in sums.items()},
            f"{', '.join(unmeasured)} not measured in every trace" if unmeasured else "")


def _devices(values: list, labels: list[str]) -> tuple[dict | None, str]:
    """Every trace's devices side by side, ``<label>/<device>``: never summed across traces."""
    missing = sum(not isinstance(v, Mapping) for v in values)
    if missing or not values:
        return None, f"not measured in {missing} of {plural(len(values), 'trace')}"
    out: dict = {}
    for i, (label, v) in enumerate(zip(labels, values)):
        name = label if not any(k.startswith(f"{label}/") for k in out) else f"{label}#{i}"  # a duplicate rank
        out.update({f"{name}/{device}": entry for device, entry in v.items()})
    return out, ""


def _chain_coverage(dicts: list[Mapping], keys: list[str], combined: dict, unmeasured: dict) -> None:
    """Σ fully chained kernels / Σ kernels; each trace's count is coverage × kernels (exact below
    10^6 kernels per trace, where the 6-digit rounding of the coverage moves it by < 0.5)."""
    if COVERAGE_KEY not in keys:
        return
    pairs = [(d.get(COVERAGE_KEY), d.get(KERNELS_KEY)) for d in dicts]
    total = sum(k for _, k in pairs if isinstance(k, int))
    if total and all(c is not None for c, k in pairs if k):
        chained = sum(round(c * k) for c, k in pairs if k)
        combined[COVERAGE_KEY] = round(chained / total, 6)
        return
    combined[COVERAGE_KEY] = None
    unmeasured[COVERAGE_KEY] = "no kernel, or a trace's coverage not measured"


def _ordered_keys(dicts: Iterable[Mapping]) -> list[str]:
    keys: dict[str, None] = {}
    for d in dicts:
        keys.update(dict.fromkeys(d))
    return list(keys)


def _agreed(values: list):
    distinct = {v for v in values if v is not None}
    return distinct.pop() if len(distinct) == 1 and None not in values else None


def _sum(values: list) -> tuple[float | int | None, str]:
    if not values:
        return None, "no trace"
    missing = sum(v is None for v in values)
    if missing:
        return None, f"not measured in {missing} of {plural(len(values), 'trace')}"
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return None, "not a number in every trace"
    return sum(values), ""


def _derive_ratios(keys: list[str], combined: dict, unmeasured: dict[str, str]) -> None:
    if "hdbi" in keys:
        combined["hdbi"] = hdbi(combined.get(DEVICE_KEY), combined.get(ORCH_KEY))
        if combined["hdbi"] is None:
            unmeasured["hdbi"] = f"needs {DEVICE_KEY} and {ORCH_KEY} measured in every trace"
    if "kernel_diversity" in keys:
        combined["kernel_diversity"] = None
        unmeasured["kernel_diversity"] = "distinct kernel names per trace cannot be combined from summaries"
    tokens = combined.get(TOKENS_KEY)
    for key in keys:
        if not key.endswith(PER_TOKEN_SUFFIX):
            continue
        base = combined.get(key[: -len(PER_TOKEN_SUFFIX)])
        combined[key] = base / tokens if base is not None and tokens else None
        if combined[key] is None:
            unmeasured[key] = "output-token count or the metric not known for every trace"


def _null_hdbi_where_a_component_is_unmeasured(dicts: list[Mapping], combined: dict, unmeasured: dict) -> None:
    """A trace whose HDBI is null because ΔFT, ΔCT or a time it needs was not measured makes the
    combined HDBI null: a ratio of sums that leaves out one rank's missing term is not a measurement."""
    if combined.get("hdbi") is None:
        return
    for d in dicts:
        if "hdbi" in d and d.get("hdbi") is None and (d.get("hdbi_reason") or any(
                d.get(k, 0) is None for k in COMPONENT_KEYS)):
            combined["hdbi"] = None
            reason = d.get("hdbi_reason") or "a component is not measured"
            unmeasured["hdbi"] = f"HDBI of a trace is not measured ({reason})"
            return


def hdbi(device_active_us: float | None, orchestration_us: float | None) -> float | None:
    """HDBI = T_DeviceActive / (T_DeviceActive + T_Orchestrate), clamped to [0, 1] ("paper Eq.3").

    Returns None when either term is unmeasured or both are 0.
    """
    if device_active_us is None or orchestration_us is None:
        return None
    total = device_active_us + orchestration_us
    if total <= 0:
        return None
    return min(1.0, max(0.0, device_active_us / total))


def combine_summaries(summaries: list[Mapping], labels: list[str] | None = None) -> dict:
    """Combine whole ``Analysis.summary`` dicts: ``all`` and each phase.

    Args:
        summaries: one ``Analysis.summary`` per trace.
        labels: one name per trace (its rank, or run/rank) for the keys of ``devices``.

    Returns:
        ``{"all": {...}, "phases": {phase: {...}}, "unmeasured": {"all": {...}, phase: {...}}, "traces": n}``.
        A phase present in only some traces combines the traces that have it.
    """
    labels = labels if labels is not None else [str(i) for i in range(len(summaries))]
    combined_all, why_all = combine_metrics([s.get("all", {}) for s in summaries], labels)
    phases: dict[str, dict] = {}
    unmeasured: dict[str, dict] = {"all": why_all}
    for phase in _ordered_keys(s.get("phases", {}) for s in summaries):
        having = [(s["phases"][phase], label) for s, label in zip(summaries, labels) if phase in s.get("phases", {})]
        phases[phase], unmeasured[phase] = combine_metrics([m for m, _ in having], [lab for _, lab in having])
    return {"all": combined_all, "phases": phases, "unmeasured": unmeasured, "traces": len(summaries)}
