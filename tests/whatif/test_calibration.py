"""Calibration input: built-in published values, JSON files, malformed files."""
from __future__ import annotations

import json

import pytest

from taxbreak.trace.errors import ERROR_CODES, TaxbreakError
from taxbreak.whatif.calibration import H200_QWEN3_8B, load_calibration, with_overrides


def test_builtin_by_name():
    assert load_calibration("h200-qwen3-8b") is H200_QWEN3_8B
    assert H200_QWEN3_8B.beta_mb == (2.494e-5, 5.193e-5, 1.478e-5)


def test_json_round_trip(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"alpha_p": 1e-3, "beta_p": 2e-5, "alpha_d": 9e-3, "beta_d": 4e-5,
                                "beta_mb": {"a": 1e-5, "b": 2e-5, "c": -1e-6}}))
    calib = load_calibration(path)
    assert calib.alpha_d_s == 9e-3 and calib.beta_mb == (1e-5, 2e-5, -1e-6)
    assert calib.source == f"file:{path}"
    assert with_overrides(calib, alpha_p_s=2e-3, beta_p_s_per_token=None).alpha_p_s == 2e-3


@pytest.mark.parametrize("content, code", [
    ("{not json", "calibration.malformed"),
    ("[1, 2]", "calibration.malformed"),
    (json.dumps({"alpha_p_s": 1e-3}), "calibration.malformed"),
    (json.dumps({"alpha_p": -1, "beta_p": 1, "alpha_d": 1, "beta_d": 1}), "calibration.malformed"),
    (json.dumps({"alpha_p": "x", "beta_p": 1, "alpha_d": 1, "beta_d": 1}), "calibration.malformed"),
    (json.dumps({"alpha_p": 1, "beta_p": 1, "alpha_d": 1, "beta_d": 1, "beta_mb": [1, 2]}), "calibration.malformed"),
])
def test_malformed_calibration_codes(tmp_path, content, code):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(TaxbreakError) as info:
        load_calibration(path)
    assert info.value.code == code and code in ERROR_CODES
    assert info.value.path == str(path) and info.value.hint


def test_missing_calibration_file(tmp_path):
    with pytest.raises(TaxbreakError) as info:
        load_calibration(tmp_path / "none.json")
    assert info.value.code == "input.not_found"
