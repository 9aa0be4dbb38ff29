"""Batching cost-model calibration: built-in published values, JSON files, sweep fits.

A calibration holds the linear iteration model of arXiv 2606.00516 (§2.2) and
the mixed-batch marginal-cost curve (§2.5), all in seconds:

    α_p [s], β_p [s/token], α_d [s], β_d [s/request], β_MB(r) = a + b·r + c·r² [s/token]

JSON form (keys in seconds; ``beta_mb`` optional)::

    {"alpha_p_s": 1.2786e-3, "beta_p_s_per_token": 2.4853e-5,
     "alpha_d_s": 8.9212e-3, "beta_d_s_per_request": 4.5865e-5,
     "beta_mb": {"a": 2.494e-5, "b": 5.193e-5, "c": 1.478e-5}, "source": "..."}

The short keys ``alpha_p``, ``beta_p``, ``alpha_d``, ``beta_d`` are accepted too.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ..trace.errors import TraceFormatError, TraceNotFoundError

_REQUIRED = {
    "alpha_p_s": ("alpha_p",),
    "beta_p_s_per_token": ("beta_p",),
    "alpha_d_s": ("alpha_d",),
    "beta_d_s_per_request": ("beta_d",),
}


@dataclass(frozen=True)
class Calibration:
    """Cost-model parameters in seconds, with where they came from.

    ``beta_mb`` is ``(a, b, c)`` or ``None`` when no mixed-batch data exist;
    ``r2`` maps fit name (``prefill``, ``decode``, ``beta_mb``) to R² where the
    values were fitted here.
    """

    alpha_p_s: float
    beta_p_s_per_token: float
    alpha_d_s: float
    beta_d_s_per_request: float
    beta_mb: tuple[float, float, float] | None = None
    source: str = ""
    r2: dict[str, float | None] = field(default_factory=dict)

    def beta_mb_at(self, share: float) -> float | None:
        """β_MB^e(r) = a + b·r + c·r² (paper Eq. 11), or ``None`` without a fit."""
        if self.beta_mb is None:
            return None
        a, b, c = self.beta_mb
        return a + b * share + c * share * share

    def as_dict(self) -> dict:
        data = asdict(self)
        data["beta_mb"] = None if self.beta_mb is None else dict(zip("abc", self.beta_mb))
        return data


# Published H200 / Qwen3-8B fp16 calibration of the authors' code
# (reproduce/calibration, beta_mb_*.json; batching-and-interference.md §2.2, §2.5).
H200_QWEN3_8B = Calibration(
    alpha_p_s=1.2786e-3,
    beta_p_s_per_token=2.4853e-5,
    alpha_d_s=8.9212e-3,
    beta_d_s_per_request=4.5865e-5,
    beta_mb=(2.494e-5, 5.193e-5, 1.478e-5),
    source="published:H200/Qwen3-8B (arXiv 2606.00516 calibration)",
    r2={"prefill": 0.9968, "decode": 0.9827, "beta_mb": None},
)

RTX_PRO_6000_QWEN3_8B = Calibration(
    alpha_p_s=4.6912e-3,
    beta_p_s_per_token=5.0079e-5,
    alpha_d_s=1.03760e-2,
    beta_d_s_per_request=1.03881e-4,
    beta_mb=(6.2934e-5, 1.9689e-4, 9.899e-6),
    source="published:RTX-PRO-6000/Qwen3-8B (arXiv 2606.00516 calibration)",
    r2={"prefill": 0.99999, "decode": 0.9948, "beta_mb": None},
)

BUILTIN = {"h200-qwen3-8b": H200_QWEN3_8B, "rtx-pro-6000-qwen3-8b": RTX_PRO_6000_QWEN3_8B}


def load_calibration(spec: str | Path) -> Calibration:
    """A built-in calibration by name (``h200-qwen3-8b``) or one read from a JSON file.

    Raises:
        TraceNotFoundError: ``input.not_found`` when the file does not exist.
        TraceFormatError: ``calibration.malformed`` when the JSON is invalid or
            a parameter is missing, not a number, negative or not finite.
    """
    if str(spec) in BUILTIN:
        return BUILTIN[str(spec)]
    path = Path(spec)
    if not path.is_file():
        raise TraceNotFoundError(
            "input.not_found", "calibration file not found", path=str(path),
            hint=f"give a JSON file or one of: {', '.join(BUILTIN)}",
        )
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise _malformed(path, f"not valid JSON: {err}") from err
    if not isinstance(data, dict):
        raise _malformed(path, "the top level must be a JSON object")
    return calibration_from_dict(data, path=str(path))


def calibration_from_dict(data: dict, path: str | None = None) -> Calibration:
    """Build a :class:`Calibration` from the JSON form (see module docstring)."""
    values = {name: _number(data, (name, *aliases), path) for name, aliases in _REQUIRED.items()}
    beta_mb = None
    raw_mb = data.get("beta_mb")
    if raw_mb is not None:
        if not isinstance(raw_mb, dict):
            raise _malformed(path, "beta_mb must be an object with a, b, c", "beta_mb")
        beta_mb = tuple(_number(raw_mb, (k,), path, allow_negative=True) for k in "abc")
    source = str(data.get("source") or (f"file:{path}" if path else "dict"))
    return Calibration(**values, beta_mb=beta_mb, source=source)


def with_overrides(calib: Calibration, **overrides: float | None) -> Calibration:
    """A copy with the non-``None`` overrides applied (CLI ``--alpha-p`` etc.)."""
    given = {k: v for k, v in overrides.items() if v is not None}
    if not given:
        return calib
    return replace(calib, **given, source=f"{calib.source} + overrides {sorted(given)}")


def _number(data: dict, keys: tuple[str, ...], path: str | None, allow_negative: bool = False) -> float:
    for key in keys:
        if key in data:
            value = data[key]
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            if not ok or (value < 0 and not allow_negative):
                raise _malformed(path, f"{key} must be a finite non-negative number, got {value!r}", key)
            return float(value)
    raise _malformed(path, f"missing parameter {keys[0]}", keys[0])


def _malformed(path: str | Path | None, message: str, location: str | None = None) -> TraceFormatError:
    return TraceFormatError(
        "calibration.malformed", message, path=None if path is None else str(path), location=location,
        hint="keys (seconds): alpha_p_s, beta_p_s_per_token, alpha_d_s, beta_d_s_per_request, beta_mb {a,b,c}",
    )
