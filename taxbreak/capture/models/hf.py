"""``--model hf:PATH``: a local Hugging Face model behind the same call contract.

Needs the optional ``transformers`` package (``pip install 'taxbreak[hf]'``).
Nothing is fetched from a hub: every load passes ``local_files_only=True``.
A directory with weights loads them; a directory with only ``config.json``
gets random weights.
"""
from __future__ import annotations

import inspect
from pathlib import Path

import torch
from torch import nn

from ...trace.errors import CaptureError


class HFCache:
    """Wraps a transformers cache object so that it has ``.length``."""

    def __init__(self, inner) -> None:
        self.inner = inner

    @property
    def length(self) -> int:
        return 0 if self.inner is None else int(self.inner.get_seq_length())


class HFModel(nn.Module):
    """``logits, cache = model(input_ids, cache, position_ids, attn_mask)`` over an HF model."""

    def __init__(self, model: nn.Module, path: str) -> None:
        super().__init__()
        self.model, self.path = model, path
        self.spec = None
        # transformers 5.x renamed `past_key_values` to `cache` (argument and output)
        params = inspect.signature(model.forward).parameters
        self._cache_arg = "cache" if "cache" in params else "past_key_values"

    def forward(self, input_ids, cache=None, position_ids=None, attn_mask=None, logits_to_keep: int = 0):
        cache = cache if cache is not None else HFCache(None)
        kwargs = {"use_cache": True, self._cache_arg: cache.inner, "position_ids": position_ids}
        if attn_mask is not None:
            # HF takes a 4-D additive mask; ours is boolean (True = may attend).
            kwargs["attention_mask"] = torch.zeros(attn_mask.shape, dtype=self.model.dtype,
                                                   device=attn_mask.device).masked_fill(
                ~attn_mask, torch.finfo(self.model.dtype).min)
        out = self.model(input_ids, **kwargs)
        logits = out.logits[:, -logits_to_keep:, :] if logits_to_keep else out.logits
        return logits, HFCache(out[self._cache_arg])


def require_transformers(path: str | None = None):
    """The transformers module, or ``model.hf_unavailable``."""
    try:
        import transformers
    except ImportError:
        raise CaptureError("model.hf_unavailable", "hf:PATH needs the transformers package",
                           path=path, hint="pip install 'taxbreak[hf]'") from None
    return transformers


def build_hf_model(path: str, *, dtype: torch.dtype, device) -> HFModel:
    """Load ``path`` (a local directory) with transformers, never from a hub.

    Raises:
        CaptureError: ``model.hf_unavailable`` without transformers,
            ``model.invalid`` when the directory has no usable config.
    """
    transformers = require_transformers(path)
    root = Path(path)
    if not (root / "config.json").is_file():
        raise CaptureError("model.invalid", "no config.json in the directory", path=path,
                           hint="point hf:PATH at a local Hugging Face model directory")
    has_weights = any(root.glob("*.safetensors")) or any(root.glob("*.bin"))
    # `torch_dtype` became `dtype` in transformers 4.56 (the old name warns in 5.x)
    major_minor = tuple(int(p) for p in transformers.__version__.split(".")[:2] if p.isdigit())
    dtype_arg = {"dtype" if major_minor >= (4, 56) else "torch_dtype": dtype}
    try:
        if has_weights:
            model = transformers.AutoModelForCausalLM.from_pretrained(root, local_files_only=True, **dtype_arg)
        else:
            config = transformers.AutoConfig.from_pretrained(root, local_files_only=True)
            model = transformers.AutoModelForCausalLM.from_config(config, **dtype_arg)
    except (OSError, ValueError, KeyError) as err:
        raise CaptureError("model.invalid", f"transformers could not load it: {err}", path=path,
                           hint="check config.json (model_type) and the weight files") from err
    return HFModel(model.to(device).eval().requires_grad_(False), str(root))
