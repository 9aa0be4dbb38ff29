"""Model configurations: the published architectures at their real shapes.

Every preset copies the values of the model's published Hugging Face
``config.json`` (the URL is in ``ModelSpec.source``); weights are random from a
fixed seed, so nothing is downloaded. ``<name>-tiny`` keeps the structure
(GQA ratio, norms, positions, MoE top-k routing with its expert loop, shared
expert) at a size that runs on a laptop CPU.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from ...trace.errors import CaptureError

FAMILIES = ("llama", "gpt2", "olmoe", "qwen2_moe")


@dataclass(frozen=True)
class ModelSpec:
    """The configuration of one decoder-only model.

    Field names follow the Hugging Face config keys they come from
    (``hidden`` = ``hidden_size``, ``intermediate`` = ``intermediate_size``,
    ``moe_intermediate`` = per-expert ``moe_intermediate_size``).
    """

    name: str
    family: str  # one of FAMILIES
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int  # dense MLP width (0 for MoE layers without a dense MLP)
    vocab: int
    max_positions: int
    tie_embeddings: bool
    norm: str = "rms"  # "rms" | "layer"
    norm_eps: float = 1e-5
    positions: str = "rope"  # "rope" | "learned"
    rope_theta: float = 10000.0
    rope_scaling: dict | None = None  # Llama-3 frequency scaling, as in config.json
    qkv_bias: bool = False
    out_bias: bool = False
    mlp: str = "swiglu"  # "swiglu" | "gelu"
    mlp_bias: bool = False
    qk_norm: bool = False  # OLMoE: RMSNorm over the full q and k projections
    experts: int = 0  # routed experts per layer; 0 = dense
    top_k: int = 0
    moe_intermediate: int = 0
    norm_topk_prob: bool = False
    shared_expert_intermediate: int = 0  # Qwen2-MoE shared expert (0 = none)
    source: str = ""
    published_params: int | None = None  # total parameters as published
    published_params_source: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    def as_dict(self) -> dict:
        return asdict(self)


_LLAMA3_ROPE = {
    "rope_type": "llama3",
    "factor": 32.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}

PRESETS: dict[str, ModelSpec] = {
    "llama-3.2-1b": ModelSpec(
        name="llama-3.2-1b", family="llama", hidden=2048, layers=16, heads=32, kv_heads=8,
        head_dim=64, intermediate=8192, vocab=128256, max_positions=131072, tie_embeddings=True,
        norm_eps=1e-5, rope_theta=500000.0, rope_scaling=_LLAMA3_ROPE,
        source="https://huggingface.co/meta-llama/Llama-3.2-1B/blob/main/config.json",
        published_params=1_235_814_400,
        published_params_source="Hugging Face safetensors metadata of meta-llama/Llama-3.2-1B (1.24B; model card: 1.23B)",
    ),
    "llama-3.2-3b": ModelSpec(
        name="llama-3.2-3b", family="llama", hidden=3072, layers=28, heads=24, kv_heads=8,
        head_dim=128, intermediate=8192, vocab=128256, max_positions=131072, tie_embeddings=True,
        norm_eps=1e-5, rope_theta=500000.0, rope_scaling=_LLAMA3_ROPE,
        source="https://huggingface.co/meta-llama/Llama-3.2-3B/blob/main/config.json",
        published_params=3_212_749_824,
        published_params_source="Hugging Face safetensors metadata of meta-llama/Llama-3.2-3B (3.21B)",
    ),
    "gpt2": ModelSpec(
        name="gpt2", family="gpt2", hidden=768, layers=12, heads=12, kv_heads=12, head_dim=64,
        intermediate=3072, vocab=50257, max_positions=1024, tie_embeddings=True, norm="layer",
        norm_eps=1e-5, positions="learned", qkv_bias=True, out_bias=True, mlp="gelu", mlp_bias=True,
        source="https://huggingface.co/openai-community/gpt2/blob/main/config.json",
        published_params=124_439_808,
        published_params_source="GPT-2 small, 124M (Radford et al. 2019; openai-community/gpt2 model card)",
    ),
    "olmoe-1b-7b": ModelSpec(
        name="olmoe-1b-7b", family="olmoe", hidden=2048, layers=16, heads=16, kv_heads=16,
        head_dim=128, intermediate=0, vocab=50304, max_positions=4096, tie_embeddings=False,
        norm_eps=1e-5, rope_theta=10000.0, qk_norm=True, experts=64, top_k=8, moe_intermediate=1024,
        norm_topk_prob=False,
        source="https://huggingface.co/allenai/OLMoE-1B-7B-0924/blob/main/config.json",
        published_params=6_920_000_000,
        published_params_source="OLMoE paper arXiv 2409.02060 and model card: 6.92B total (model card 6.9B), 1.3B active",
    ),
    "qwen1.5-moe-a2.7b": ModelSpec(
        name="qwen1.5-moe-a2.7b", family="qwen2_moe", hidden=2048, layers=24, heads=16, kv_heads=16,
        head_dim=128, intermediate=0, vocab=151936, max_positions=8192, tie_embeddings=False,
        norm_eps=1e-6, rope_theta=1000000.0, qkv_bias=True, experts=60, top_k=4,
        moe_intermediate=1408, norm_topk_prob=False, shared_expert_intermediate=5632,
        source="https://huggingface.co/Qwen/Qwen1.5-MoE-A2.7B/blob/main/config.json",
        published_params=14_300_000_000,
        published_params_source="Qwen blog 'Qwen1.5-MoE: Matching 7B Model Performance with 1/3 Activated Parameters': 14.3B total, 2.7B activated",
    ),
}

# Tiny sizes keep every structural feature; the expert count stays above top-k
# so routing still selects a subset and the per-expert loop still runs. Depth and
# width shrink in proportion to the full model (layers / 8, hidden / 16, with a
# floor), so two presets of one family stay two different networks at CPU size.
_TINY = {"head_dim": 32, "min_hidden": 128, "min_layers": 2, "layer_div": 8, "hidden_div": 16,
         "vocab": 2048, "moe_intermediate": 64, "shared_expert_intermediate": 256, "experts": 16}


def preset_names() -> list[str]:
    """Every preset name, full-size and ``-tiny``."""
    return sorted(PRESETS) + sorted(f"{name}-tiny" for name in PRESETS)


def _tiny_heads(spec: ModelSpec) -> tuple[int, int]:
    """Query and key/value heads at tiny width: hidden / 16 in whole heads, the GQA ratio kept."""
    ratio = spec.heads // spec.kv_heads
    step = _TINY["head_dim"] * ratio  # whole KV groups of head_dim-wide heads
    hidden = max(_TINY["min_hidden"], spec.hidden // _TINY["hidden_div"])
    heads = max(1, -(-hidden // step)) * ratio
    return heads, heads // ratio


def tiny_spec(spec: ModelSpec) -> ModelSpec:
    """The same architecture at CPU size: depth / 8 (at least 2 layers), width / 16 (at least 128), 16 experts."""
    heads, kv_heads = _tiny_heads(spec)
    hidden = heads * _TINY["head_dim"]
    experts = _TINY["experts"] if spec.is_moe else 0
    return replace(
        spec, name=f"{spec.name}-tiny", hidden=hidden,
        layers=max(_TINY["min_layers"], spec.layers // _TINY["layer_div"]),
        heads=heads, kv_heads=kv_heads, head_dim=_TINY["head_dim"],
        intermediate=2 * hidden if spec.intermediate else 0, vocab=_TINY["vocab"],
        max_positions=min(spec.max_positions, 4096) if spec.positions == "learned" else spec.max_positions,
        experts=experts, top_k=min(spec.top_k, experts),
        moe_intermediate=_TINY["moe_intermediate"] if spec.is_moe else 0,
        shared_expert_intermediate=_TINY["shared_expert_intermediate"] if spec.shared_expert_intermediate else 0,
        published_params=None, published_params_source="",
    )


def resolve_spec(preset: str | ModelSpec, *, tiny: bool = False, layers: int | None = None,
                 hidden: int | None = None, experts: int | None = None) -> ModelSpec:
    """A preset name (or a spec) with the tiny flag and overrides applied.

    Raises:
        CaptureError: ``model.unknown`` for an unknown preset name,
            ``model.invalid`` for overrides that cannot form a model.
    """
    spec = preset if isinstance(preset, ModelSpec) else _lookup(preset)
    if tiny and not spec.name.endswith("-tiny"):
        spec = tiny_spec(spec)
    return apply_overrides(spec, layers=layers, hidden=hidden, experts=experts)


def _lookup(name: str) -> ModelSpec:
    key = name.strip().lower()
    if key in PRESETS:
        return PRESETS[key]
    if key.endswith("-tiny") and key[: -len("-tiny")] in PRESETS:
        return tiny_spec(PRESETS[key[: -len("-tiny")]])
    raise CaptureError(
        "model.unknown", f"unknown model preset {name!r}",
        hint="choose one of: " + ", ".join(preset_names()) + "; or hf:PATH for a local Hugging Face model",
    )


def apply_overrides(spec: ModelSpec, *, layers: int | None = None, hidden: int | None = None,
                    experts: int | None = None) -> ModelSpec:
    """Change depth, width (head_dim kept, head counts follow) or expert count."""
    changes: dict = {}
    if layers is not None:
        _require(layers >= 1, f"layers must be >= 1, got {layers}")
        changes["layers"] = layers
    if hidden is not None:
        _require(hidden >= spec.head_dim and hidden % spec.head_dim == 0,
                 f"hidden must be a multiple of head_dim {spec.head_dim}, got {hidden}")
        heads = hidden // spec.head_dim
        ratio = spec.heads // spec.kv_heads
        _require(heads % ratio == 0, f"hidden {hidden} gives {heads} heads, not a multiple of the GQA ratio {ratio}")
        changes.update(hidden=hidden, heads=heads, kv_heads=heads // ratio)
    if experts is not None:
        _require(spec.is_moe, f"{spec.name} is dense; --experts applies to MoE presets only")
        _require(experts >= 1, f"experts must be >= 1, got {experts}")
        changes.update(experts=experts, top_k=min(spec.top_k, experts))
    if not changes:
        return spec
    return replace(spec, **changes, published_params=None, published_params_source="")


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise CaptureError("model.invalid", message, hint="see docs/capture.md for the overrides")
