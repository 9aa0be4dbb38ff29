"""Resolve the overload of a recorded ATen op and build a ready-to-call invocation.

The schema of every overload of ``torch.ops.aten.<op>`` is scored against the
recorded argument list (:mod:`.replay_inputs`): an overload qualifies when it
has as many arguments as were recorded and every recorded entry fits its
argument type; qualifying overloads are tried best score first, and the first
that runs is kept. Runs on any device: the tests rebuild every op of small
CPU workloads; the GPU replay rebuilds the same records on ``cuda``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..trace.errors import CaptureError
from .replay_inputs import SKIPPED_OPS, OpRecord, dtype_of, is_tensor_type, parse_concrete

_NO_VALUE = object()


@dataclass
class PreparedCall:
    """An overload with its rebuilt arguments; ``run()`` calls it once."""

    record: OpRecord
    overload: Any
    args: list
    kwargs: dict = field(default_factory=dict)

    @property
    def overload_name(self) -> str:
        return str(self.overload)

    def run(self) -> Any:
        return self.overload(*self.args, **self.kwargs)


def unsupported(record: OpRecord, reason: str, hint: str | None = None) -> CaptureError:
    """The ``replay.unsupported`` error for one record."""
    return CaptureError(code="replay.unsupported", message=f"{record.name}: {reason}", hint=hint)


def _kind(jit_type) -> tuple[str, str | None, bool]:
    """(kind, element kind, optional) of a schema argument type."""
    optional = jit_type.kind() == "OptionalType"
    inner = jit_type.getElementType() if optional else jit_type
    element = inner.getElementType().kind() if inner.kind() == "ListType" else None
    if element == "OptionalType":
        element = "Optional" + inner.getElementType().getElementType().kind()
    return inner.kind(), element, optional


def arg_score(arg, rtype: str, concrete: Any) -> int | None:
    """How well one recorded entry fits one schema argument (None: it does not)."""
    kind, element, optional = _kind(arg.type)
    if is_tensor_type(rtype):
        return 3 if kind == "TensorType" else None
    if rtype == "TensorList":
        return {"TensorType": 3, "OptionalTensorType": 2}.get(element) if kind == "ListType" else None
    if rtype == "ScalarList":
        return {"IntType": 3, "SymIntType": 3, "FloatType": 2, "BoolType": 2}.get(element) if kind == "ListType" else None
    if rtype == "Scalar":
        return _scalar_score(kind, parse_concrete(concrete))
    if rtype == "":
        if optional or arg.has_default_value() or kind == "DeviceObjType":
            return 2
        return None
    return None


def _scalar_score(kind: str, value: Any) -> int | None:
    if kind == "NumberType":
        return 3
    if kind == "BoolType":
        return 3 if isinstance(value, bool) else None
    if kind in ("IntType", "SymIntType"):
        return 3 if isinstance(value, int) and not isinstance(value, bool) else (1 if value == "" else None)
    if kind == "FloatType":
        return 3 if isinstance(value, float) else (2 if isinstance(value, int) and not isinstance(value, bool) else None)
    if kind == "StringType":
        return 1
    return None


def _schema_score(schema, record: OpRecord) -> int | None:
    if len(schema.arguments) != record.arity:
        return None
    total = 0
    for arg, rtype, conc in zip(schema.arguments, record.types, record.concrete):
        score = arg_score(arg, rtype, conc)
        if score is None:
            return None
        total += score
    return total


def resolve_overloads(record: OpRecord) -> list:
    """Every overload of the record's op whose schema fits, best first.

    Raises:
        CaptureError: ``replay.unsupported`` when the op is not an ATen op, is
            skipped by policy, or no overload fits (the reason says why).
    """
    import torch

    if record.name in SKIPPED_OPS:
        raise unsupported(record, f"skipped: {SKIPPED_OPS[record.name]}")
    if not record.name.startswith("aten::"):
        raise unsupported(record, "not an ATen op (torch.ops.aten cannot call it)")
    if not record.types:
        raise unsupported(record, "no recorded inputs", hint="profile with record_shapes=True")
    try:
        packet = getattr(torch.ops.aten, record.name[len("aten::"):])
    except (AttributeError, RuntimeError) as err:
        raise unsupported(record, "no such operator in this torch build") from err
    scored = []
    for name in packet.overloads():
        overload = getattr(packet, name)
        score = _schema_score(overload._schema, record)
        if score is not None:
            # prefer functional overloads over .out ones at equal score
            scored.append((score, not name.endswith("out"), name == "default", overload))
    if not scored:
        raise unsupported(record, _no_fit_reason(packet, record))
    scored.sort(key=lambda item: item[:3], reverse=True)
    return [item[3] for item in scored]


def _no_fit_reason(packet, record: OpRecord) -> str:
    """Why no overload fits: name the unrecorded argument when that is the cause."""
    for name in packet.overloads():
        schema = getattr(packet, name)._schema
        if len(schema.arguments) != record.arity:
            continue
        for arg, rtype in zip(schema.arguments, record.types):
            kind, element, _ = _kind(arg.type)
            if rtype == "" and element == "OptionalTensorType":
                return f"argument '{arg.name}' (Tensor?[] indices) is not recorded by the profiler"
            if rtype == "" and kind == "StringType":
                return f"string argument '{arg.name}' is not recorded by the profiler"
            if rtype == "" and kind == "TensorType":
                return f"tensor argument '{arg.name}' was recorded without type or shape"
    return f"no overload matches the recorded types {record.types}"


def make_tensor(dims: list, strides: list, dtype, device: str, fill: str = "default"):
    """A tensor of the recorded shape, strides and dtype with harmless values.

    Floats are uniform in [0, 1) (no NaN from log/sqrt); integers are 0 (a valid
    index into any non-empty dimension) or 1 with ``fill="ones"`` (divisors);
    bools are True. Recorded strides are honoured (transposed or broadcast
    inputs select different kernels) by viewing one flat buffer.
    """
    import torch

    dims = [int(d) for d in dims]
    use_strides = isinstance(strides, list) and len(strides) == len(dims) and all(isinstance(s, int) for s in strides)
    if use_strides and all(d > 0 for d in dims):
        numel = 1 + sum((d - 1) * max(int(s), 0) for d, s in zip(dims, strides))
    else:
        use_strides, numel = False, 1
        for d in dims:
            numel *= max(d, 0)
    flat = _filled(numel, dtype, device, fill)
    if not use_strides:
        return flat.reshape(dims).clone() if numel else flat.reshape(dims)
    # set_ rather than as_strided: the result is not a view, so in-place ops
    # that refuse views (detach_, resize_) still run
    return torch.empty(0, dtype=dtype, device=device).set_(flat.untyped_storage(), 0, dims, [int(s) for s in strides])


def _filled(numel: int, dtype, device: str, fill: str):
    import torch

    if dtype.is_floating_point or dtype.is_complex:
        base = torch.rand(numel, device=device, dtype=torch.float32)
        return base.to(dtype)
    if dtype == torch.bool:
        return torch.ones(numel, device=device, dtype=torch.bool)
    value = 1 if fill == "ones" else 0
    return torch.full((numel,), value, device=device, dtype=dtype)


def record_dtype(record: OpRecord, default_dtype):
    """Element dtype for tensor lists (not recorded): the record's first tensor dtype."""
    for rtype in record.types:
        found = dtype_of(rtype)
        if found is not None and found.is_floating_point:
            return found
    return default_dtype


def build_value(arg, rtype: str, dims, strides, concrete, ctx: dict) -> Any:
    """The Python value of one argument (``_NO_VALUE``: leave to the schema default)."""
    kind, element, optional = _kind(arg.type)
    if is_tensor_type(rtype):
        dtype = dtype_of(rtype)
        # 0-dim double/long tensors are wrapped Python numbers, which live on the CPU
        on_cpu = dims == [] and rtype in ("double", "long int")
        return make_tensor(dims, strides, dtype, "cpu" if on_cpu else ctx["device"], ctx["fill"])
    if rtype == "TensorList":
        strides = strides if isinstance(strides, list) else []
        return [make_tensor(d, strides[i] if i < len(strides) else None, ctx["list_dtype"], ctx["device"], ctx["fill"])
                for i, d in enumerate(dims)]
    if rtype in ("Scalar", "ScalarList"):
        value = parse_concrete(concrete)
        if value == "" and arg.has_default_value():
            return _NO_VALUE
        return 1 if value == "" else value
    if kind == "DeviceObjType":
        return ctx["device"]
    return _NO_VALUE if arg.has_default_value() else None


def prepare_call(record: OpRecord, overload, device: str = "cpu", default_dtype=None, fill: str = "default") -> PreparedCall:
    """Rebuild the arguments of ``record`` for ``overload`` on ``device``."""
    import torch

    ctx = {"device": device, "fill": fill, "list_dtype": record_dtype(record, default_dtype or torch.float32)}
    args, kwargs, pending = [], {}, []
    for i, arg in enumerate(overload._schema.arguments):
        value = build_value(arg, record.types[i], record.dims[i], record.strides[i], record.concrete[i], ctx)
        if arg.kwarg_only:
            if value is not _NO_VALUE:
                kwargs[arg.name] = value
            continue
        if value is _NO_VALUE:
            pending.append(arg.default_value)
            continue
        args.extend(pending)  # defaults before a given positional argument
        pending = []
        args.append(value)
    return PreparedCall(record, overload, args, kwargs)


def rebuild(record: OpRecord, device: str = "cpu", default_dtype=None,
            check: Callable[[Any], None] | None = None) -> tuple[PreparedCall, Any]:
    """Resolve, rebuild and run ``record`` once; returns the call and its output.

    Each fitting overload is tried best first, with integer tensors filled with
    0 and then 1; the first call that runs wins.

    Raises:
        CaptureError: ``replay.unsupported`` with the last failure as reason.
    """
    last = None
    for overload in resolve_overloads(record):
        for fill in ("default", "ones"):
            try:
                call = prepare_call(record, overload, device, default_dtype, fill)
                out = call.run()
                if check is not None:
                    check(out)
                return call, out
            except Exception as err:  # noqa: BLE001 - any torch failure means "try the next overload"
                last = f"{overload}: {type(err).__name__}: {str(err).splitlines()[0][:160] if str(err) else ''}"
    raise unsupported(record, f"no overload runs with the rebuilt inputs ({last})")


def output_shapes(out: Any) -> list:
    """Shapes of an op's tensor outputs, in order (nested tuples flattened)."""
    import torch

    if isinstance(out, torch.Tensor):
        return [list(out.shape)]
    if isinstance(out, (tuple, list)):
        return [shape for item in out for shape in output_shapes(item)]
    return []
