"""Model presets that reproduce real dense and MoE architectures, no download.

``build_model("llama-3.2-1b")``, ``build_model("olmoe-1b-7b", tiny=True)``,
``count_parameters(PRESETS["gpt2"])``; the call contract is in :mod:`.decoder`.
"""
from .build import DTYPES, build_model, count_parameters, parse_dtype
from .cache import KVCache
from .decoder import CausalLM
from .spec import PRESETS, ModelSpec, apply_overrides, preset_names, resolve_spec, tiny_spec

__all__ = [
    "DTYPES",
    "PRESETS",
    "CausalLM",
    "KVCache",
    "ModelSpec",
    "apply_overrides",
    "build_model",
    "count_parameters",
    "parse_dtype",
    "preset_names",
    "resolve_spec",
    "tiny_spec",
]
