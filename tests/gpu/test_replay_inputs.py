"""Rebuilding ATen calls from recorded shapes, types, strides and values (CPU)."""
from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from taxbreak.capture.replay_call import output_shapes, rebuild, resolve_overloads
from taxbreak.capture.replay_inputs import SKIPPED_OPS, dtype_of, parse_concrete, parse_record
from taxbreak.trace.errors import CaptureError


def rec(name, types, dims=None, strides=None, concrete=None):
    n = len(types)
    return parse_record(name, json.dumps(dims or [[]] * n), json.dumps(types),
                        json.dumps(strides) if strides is not None else None,
                        json.dumps(concrete or [""] * n))


@pytest.mark.parametrize("text,value", [("0.", 0.0), ("True", True), ("False", False), ("6", 6),
                                        ("[1, 2]", [1, 2]), ("-1", -1), ("1e-06", 1e-06), ("", ""),
                                        ("inf", float("inf")), ("none", "none")])
def test_parse_concrete(text, value):
    assert parse_concrete(text) == value


@pytest.mark.parametrize("name,dtype", [("c10::BFloat16", torch.bfloat16), ("long int", torch.int64),
                                        ("float", torch.float32), ("c10::Half", torch.float16),
                                        ("bool", torch.bool), ("Scalar", None), ("TensorList", None)])
def test_dtype_names(name, dtype):
    assert dtype_of(name) == dtype


def test_mm_keeps_recorded_strides():
    # the weight of F.linear reaches aten::mm transposed: strides [1, 8]
    call, out = rebuild(rec("aten::mm", ["float", "float"], [[4, 8], [8, 16]], [[8, 1], [1, 8]]))
    assert call.overload_name == "aten.mm.default"
    assert call.args[1].stride() == (1, 8) and list(out.shape) == [4, 16]


def test_add_tensor_vs_scalar_overloads():
    call, _ = rebuild(rec("aten::add", ["float", "double", "Scalar"], [[4, 1], [], []], concrete=["", "", "1"]))
    assert call.overload_name == "aten.add.Tensor"
    assert call.args[1].device.type == "cpu" and call.args[1].dim() == 0  # a wrapped number
    call, _ = rebuild(rec("aten::add_", ["float", "Scalar", "Scalar"], [[2, 1], [], []],
                          concrete=["", "1.1920928955078125e-07", "1"]))
    assert call.overload_name == "aten.add_.Scalar" and call.args[1] == pytest.approx(1.19e-07, rel=1e-2)


def test_where_scalar_other_and_bf16_factory():
    call, out = rebuild(rec("aten::where", ["bool", "float", "Scalar"], [[2, 3], [2, 3], []],
                            concrete=["", "", "0."]))
    assert call.overload_name == "aten.where.ScalarOther" and list(out.shape) == [2, 3]
    call, out = rebuild(rec("aten::empty", ["ScalarList", "Scalar", "", "", "Scalar", ""],
                            concrete=["[3]", "15", "", "", "False", ""]))
    assert out.dtype == torch.bfloat16 and list(out.shape) == [3]


def test_tensor_list_takes_the_default_dtype():
    record = rec("aten::cat", ["TensorList", "Scalar"], [[[2, 3], [2, 3]], []], [[[3, 1], [3, 1]], []], ["", "0"])
    call, out = rebuild(record, default_dtype=torch.bfloat16)
    assert [t.dtype for t in call.args[0]] == [torch.bfloat16] * 2 and list(out.shape) == [4, 3]


def test_kwarg_only_and_defaults():
    call, out = rebuild(rec("aten::sum", ["float", "ScalarList", "Scalar", "Scalar"], [[2, 3], [], [], []],
                            concrete=["", "[1]", "True", "6"]))
    assert call.kwargs == {"dtype": 6} and list(out.shape) == [2, 1]
    call, _ = rebuild(rec("aten::gelu", ["float", ""], [[2, 3], []]))
    assert call.kwargs == {}  # approximate is not recorded: the schema default applies


def test_topk_values_and_indices():
    call, out = rebuild(rec("aten::topk", ["float", "Scalar", "Scalar", "Scalar", "Scalar"],
                            [[4, 16], [], [], [], []], concrete=["", "3", "-1", "True", "True"]))
    assert output_shapes(out) == [[4, 3], [4, 3]]


def test_integer_inputs_are_valid_indices():
    call, out = rebuild(rec("aten::embedding", ["float", "long int", "Scalar", "Scalar", "Scalar"],
                            [[16, 8], [3], [], [], []], concrete=["", "", "-1", "False", "False"]))
    assert list(out.shape) == [3, 8] and int(call.args[1].max()) == 0


def test_in_place_op_on_a_strided_input_is_not_a_view():
    call, _ = rebuild(rec("aten::detach_", ["long int"], [[4]], [[1]]))
    assert call.overload_name == "aten.detach_.default"


@pytest.mark.parametrize("name,types,dims,reason", [
    ("aten::index", ["float", ""], [[2, 3], []], "Tensor?[] indices"),
    ("aten::einsum", ["", "TensorList", ""], [[], [[2, 3], [2, 3]], []], "string argument 'equation'"),
    ("aten::nonzero", ["bool"], [[2, 3]], "skipped: data-dependent"),
    ("aten::index_add_", ["float", "Scalar", "long int", "float"], [[4, 8], [], [3], [3, 8]], "skipped"),
    ("detach_", ["long int"], [[1]], "not an ATen op"),
    ("aten::no_such_op_xyz", ["float"], [[1]], "no such operator"),
    ("aten::mm", ["float"], [[1]], "no overload matches"),
    ("aten::mm", [], [], "no recorded inputs"),
])
def test_unsupported_records_say_why(name, types, dims, reason):
    with pytest.raises(CaptureError) as info:
        rebuild(rec(name, types, dims))
    assert info.value.code == "replay.unsupported" and reason in info.value.message


def test_malformed_record_json():
    with pytest.raises(CaptureError) as info:
        parse_record("aten::mm", "[[4, 8]", '["float"]')
    assert info.value.code == "replay.unsupported"


def test_every_skipped_op_is_refused_with_its_reason():
    for name, reason in SKIPPED_OPS.items():
        with pytest.raises(CaptureError, match="skipped"):
            resolve_overloads(rec(name, ["float"], [[2]]))


dims_st = st.lists(st.integers(1, 5), min_size=1, max_size=3)


@settings(max_examples=30, deadline=None)
@given(dims=dims_st, dtype=st.sampled_from(["float", "c10::BFloat16", "double"]),
       op=st.sampled_from(["aten::silu", "aten::rsqrt", "aten::neg", "aten::clone", "aten::exp"]))
def test_unary_ops_keep_the_shape(dims, dtype, op):
    types = [dtype] + ([""] if op == "aten::clone" else [])
    call, out = rebuild(rec(op, types, [dims] + ([[]] if op == "aten::clone" else [])))
    assert list(out.shape) == dims and out.dtype == dtype_of(dtype)


@settings(max_examples=30, deadline=None)
@given(m=st.integers(1, 6), k=st.integers(1, 6), n=st.integers(1, 6), transposed=st.booleans())
def test_mm_shapes_and_strides(m, k, n, transposed):
    strides = [[k, 1], [1, k] if transposed else [n, 1]]
    call, out = rebuild(rec("aten::mm", ["float", "float"], [[m, k], [k, n]], strides))
    assert list(out.shape) == [m, n] and list(call.args[1].stride()) == strides[1]
