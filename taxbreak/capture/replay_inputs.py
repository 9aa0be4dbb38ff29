"""Rebuild an ATen op's inputs from what the profiler recorded, and call it alone.

With ``record_shapes`` Kineto writes, per ``cpu_op``, four parallel lists (one
entry per schema argument, defaults included): ``Input Dims``, ``Input type``,
``Input Strides`` and ``Concrete Inputs``. The readers keep them as JSON text
in ``host_events``. What one entry can say (torch 2.x):

=========================  ==========================  =============================
``Input type``             ``Input Dims``              rebuilt as
=========================  ==========================  =============================
``float``, ``c10::BFloat16`` …  ``[4, 8]``            tensor of that dtype, shape, strides
``TensorList``             ``[[4, 8], [4, 8]]``        list of tensors (dtype: see below)
``Scalar``                 ``[]``                      the concrete value (``"0."``, ``"True"``, ``"6"``)
``ScalarList``             ``[]``                      the concrete list (``"[1, 2]"``)
``""``                     ``[]``                      None / the schema default
=========================  ==========================  =============================

The overload is not recorded; it is resolved by matching these entries against
every overload's schema (:func:`resolve_overloads`), best first. What the
record cannot say is listed as unsupported rather than guessed: ``Tensor?[]``
indices (``aten::index``, ``index_put_``) and strings without a default
(``einsum``'s equation) are recorded as ``""``. A string *with* a default
(``gelu``'s ``approximate``) falls back to the default, so a ``tanh`` GELU
replays as the exact one: a documented limitation of the recorded shapes.
"""
from __future__ import annotations

import ast
import json
import math
from dataclasses import dataclass, field
from typing import Any

from ..trace.errors import CaptureError

# Kineto "Input type" spelling (c10 type names) -> torch dtype attribute.
DTYPE_NAMES: dict[str, str] = {
    "float": "float32", "double": "float64", "c10::Half": "float16", "c10::BFloat16": "bfloat16",
    "long int": "int64", "int": "int32", "short int": "int16", "signed char": "int8",
    "unsigned char": "uint8", "bool": "bool", "c10::complex<float>": "complex64",
    "c10::complex<double>": "complex128", "c10::complex<c10::Half>": "complex32",
    "c10::Float8_e4m3fn": "float8_e4m3fn", "c10::Float8_e5m2": "float8_e5m2",
    "c10::Float8_e4m3fnuz": "float8_e4m3fnuz", "c10::Float8_e5m2fnuz": "float8_e5m2fnuz",
}

# c10::ScalarType enum values, as recorded for ``dtype`` arguments ("6").
SCALAR_TYPES: dict[int, str] = {
    0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32",
    7: "float64", 8: "complex32", 9: "complex64", 10: "complex128", 11: "bool", 15: "bfloat16",
    23: "float8_e5m2", 24: "float8_e4m3fn", 25: "float8_e5m2fnuz", 26: "float8_e4m3fnuz",
}
LAYOUTS: dict[int, str] = {0: "strided", 1: "sparse_coo"}
MEMORY_FORMATS: dict[int, str] = {0: "contiguous_format", 1: "preserve_format", 2: "channels_last",
                                  3: "channels_last_3d"}

# Ops whose replay would synchronize the host or whose output size depends on
# the data (TaxBreak replays none of them; SODA report.py skips the same set).
SKIPPED_OPS: dict[str, str] = {
    "aten::nonzero": "data-dependent output size (synchronizes the host)",
    "aten::nonzero_static": "data-dependent values",
    "aten::unique": "data-dependent output size (synchronizes the host)",
    "aten::_unique": "data-dependent output size (synchronizes the host)",
    "aten::_unique2": "data-dependent output size (synchronizes the host)",
    "aten::unique_dim": "data-dependent output size (synchronizes the host)",
    "aten::unique_consecutive": "data-dependent output size (synchronizes the host)",
    "aten::index_add": "synchronizing / data-dependent (excluded as published)",
    "aten::index_add_": "synchronizing / data-dependent (excluded as published)",
    "aten::item": "copies a value to the host (synchronizes)",
    "aten::_local_scalar_dense": "copies a value to the host (synchronizes)",
    "aten::masked_select": "data-dependent output size (synchronizes the host)",
    "aten::is_nonzero": "copies a value to the host (synchronizes)",
    "aten::equal": "copies a value to the host (synchronizes)",
    "aten::allclose": "copies a value to the host (synchronizes)",
    "aten::_assert_async": "asserts on device data",
    "aten::repeat_interleave": "data-dependent output size when repeats is a tensor",
    "aten::multinomial": "random, data-dependent sampling",
}


@dataclass
class OpRecord:
    """What the trace recorded of one ATen op call (parsed from host_events JSON)."""

    name: str  # "aten::mm"
    dims: list = field(default_factory=list)
    types: list = field(default_factory=list)
    strides: list = field(default_factory=list)
    concrete: list = field(default_factory=list)

    @property
    def arity(self) -> int:
        return len(self.types)

    def key(self) -> str:
        """A stable identity of the call: name plus every recorded list."""
        return json.dumps([self.name, self.dims, self.types, self.strides, self.concrete])


def _load(text: Any) -> list:
    if text is None or (isinstance(text, float) and math.isnan(text)) or text == "":
        return []
    value = json.loads(text) if isinstance(text, str) else text
    return list(value) if isinstance(value, (list, tuple)) else []


def parse_record(name: str, dims: Any, types: Any, strides: Any = None, concrete: Any = None) -> OpRecord:
    """An :class:`OpRecord` from the JSON texts of one ``host_events`` row.

    Raises:
        CaptureError: ``replay.unsupported`` when the texts are not JSON lists
            of consistent length.
    """
    try:
        rec = OpRecord(name, _load(dims), _load(types), _load(strides), _load(concrete))
    except (ValueError, TypeError) as err:
        raise CaptureError(code="replay.unsupported", message=f"{name}: recorded inputs are not JSON lists",
                           location=str(err)[:120], hint="profile with record_shapes=True") from err
    n = rec.arity
    rec.dims = (rec.dims + [[]] * n)[:n] if n else rec.dims
    rec.strides = (rec.strides + [[]] * n)[:n] if n else rec.strides
    rec.concrete = (rec.concrete + [""] * n)[:n] if n else rec.concrete
    return rec


def parse_concrete(text: Any) -> Any:
    """A recorded concrete value: ``"0."`` -> 0.0, ``"True"`` -> True, ``"[1, 2]"`` -> [1, 2]."""
    if not isinstance(text, str):
        return text
    stripped = text.strip()
    if stripped in ("True", "False"):
        return stripped == "True"
    if stripped in ("inf", "-inf", "nan"):
        return float(stripped)
    try:
        return ast.literal_eval(stripped)
    except (ValueError, SyntaxError):
        return stripped


def dtype_of(type_name: str):
    """torch dtype for a Kineto type name, or ``None`` if it is not a tensor type."""
    import torch

    attr = DTYPE_NAMES.get(type_name)
    return getattr(torch, attr, None) if attr else None


def is_tensor_type(type_name: str) -> bool:
    return type_name in DTYPE_NAMES
