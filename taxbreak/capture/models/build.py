"""Build a model from a preset or spec: random weights from a fixed seed."""
from __future__ import annotations

import torch
from torch import nn

from ...trace.errors import CaptureError
from .decoder import CausalLM
from .spec import ModelSpec, resolve_spec

DTYPES = {
    "float32": torch.float32, "fp32": torch.float32,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float16": torch.float16, "fp16": torch.float16,
}
INIT_STD = 0.02  # HF initializer_range of every preset


def parse_dtype(dtype: str | torch.dtype | None, device: str) -> torch.dtype:
    """``None`` -> bfloat16 on CUDA (the paper's precision), float32 on CPU."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype is None:
        return torch.bfloat16 if str(device).startswith("cuda") else torch.float32
    try:
        return DTYPES[dtype.lower()]
    except KeyError:
        raise CaptureError("model.invalid", f"unknown dtype {dtype!r}",
                           hint="use one of: " + ", ".join(sorted(DTYPES))) from None


def build_model(preset_or_spec: str | ModelSpec, *, tiny: bool = False, layers: int | None = None,
                hidden: int | None = None, experts: int | None = None,
                dtype: str | torch.dtype | None = None, device: str | torch.device = "cpu",
                seed: int = 0) -> nn.Module:
    """A ready-to-run model in eval mode.

    Args:
        preset_or_spec: a preset name (``llama-3.2-1b``, ``gpt2-tiny``, ...),
            ``hf:PATH`` for a local Hugging Face model, or a :class:`ModelSpec`.
        tiny: use the CPU-size variant of the preset.
        layers, hidden, experts: overrides (see :func:`apply_overrides`).
        dtype: ``float32``/``bfloat16``/``float16``; default bf16 on CUDA, fp32 on CPU.
        device: where the weights live.
        seed: weights are ``N(0, 0.02)`` from this seed (norms 1, biases 0).

    Raises:
        CaptureError: ``model.unknown``, ``model.invalid``, ``model.hf_unavailable``.
    """
    if isinstance(preset_or_spec, str) and preset_or_spec.startswith("hf:"):
        from .hf import build_hf_model

        return build_hf_model(preset_or_spec[3:], dtype=parse_dtype(dtype, str(device)), device=device)
    spec = resolve_spec(preset_or_spec, tiny=tiny, layers=layers, hidden=hidden, experts=experts)
    torch_dtype = parse_dtype(dtype, str(device))
    # Built on the meta device, then materialized once on the target device:
    # a 14B-parameter preset never exists twice in memory.
    with torch.device("meta"):
        model = CausalLM(spec)
    model = model.to(dtype=torch_dtype).to_empty(device=device)
    model.tie_weights()  # to_empty replaces parameters one by one, untying them
    model.reset_buffers()
    init_weights(model, seed)
    return model.eval().requires_grad_(False)


def init_weights(model: nn.Module, seed: int) -> None:
    """Deterministic init in parameter-name order: matrices N(0, std), norms 1, biases 0."""
    device = next(model.parameters()).device
    gen = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias"):
                param.zero_()
            elif param.dim() == 1:
                param.fill_(1.0)
            else:
                param.normal_(0.0, INIT_STD, generator=gen)


def count_parameters(spec: ModelSpec | str) -> int:
    """Total parameters (tied weights once), computed on the meta device."""
    spec = resolve_spec(spec) if isinstance(spec, str) else spec
    with torch.device("meta"):
        model = CausalLM(spec)
    return sum(p.numel() for p in model.parameters())
