"""Building blocks written the way eager Hugging Face code writes them.

The op sequence matters more than speed here: the quantity under study is the
number of ATen ops (and GPU kernels) each token costs, so norms, rotary
embeddings and attention follow the HF modeling files op for op
(``modeling_llama.py``, ``modeling_gpt2.py``, ``modeling_olmoe.py``,
``modeling_qwen2_moe.py``).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .cache import KVCache
from .spec import ModelSpec


class RMSNorm(nn.Module):
    """LlamaRMSNorm: variance in fp32, then cast back and scale."""

    def __init__(self, width: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.float32)
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        return self.weight * x.to(dtype)


def make_norm(spec: ModelSpec, width: int | None = None) -> nn.Module:
    width = width or spec.hidden
    if spec.norm == "layer":
        return nn.LayerNorm(width, eps=spec.norm_eps)
    return RMSNorm(width, spec.norm_eps)


def rope_inv_freq(spec: ModelSpec) -> torch.Tensor:
    """Inverse frequencies, with Llama-3 scaling when the config asks for it."""
    dim = spec.head_dim
    inv_freq = 1.0 / (spec.rope_theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    scaling = spec.rope_scaling or {}
    if scaling.get("rope_type") != "llama3":
        return inv_freq
    # transformers' _compute_llama3_parameters: long wavelengths divided by
    # `factor`, short ones kept, a smooth blend in between.
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old_len = scaling["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > old_len / low, inv_freq / factor, inv_freq)
    smooth = (old_len / wavelen - low) / (high - low)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = (wavelen >= old_len / high) & (wavelen <= old_len / low)
    return torch.where(is_medium, blended, scaled)


def rope_cos_sin(inv_freq: torch.Tensor, position_ids: torch.Tensor, dtype: torch.dtype):
    """LlamaRotaryEmbedding.forward: cos/sin ``[B, T, head_dim]`` per step."""
    inv = inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
    pos = position_ids[:, None, :].float()
    freqs = (inv @ pos).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """GQA: ``[B, kv, S, D]`` -> ``[B, kv*n_rep, S, D]`` (HF repeat_kv)."""
    if n_rep == 1:
        return x
    b, kv, s, d = x.shape
    return x[:, :, None, :, :].expand(b, kv, n_rep, s, d).reshape(b, kv * n_rep, s, d)


class Attention(nn.Module):
    """Multi-head / grouped-query attention over the KV cache (SDPA kernel)."""

    def __init__(self, spec: ModelSpec, layer_idx: int) -> None:
        super().__init__()
        self.spec, self.layer_idx = spec, layer_idx
        q_width, kv_width = spec.heads * spec.head_dim, spec.kv_heads * spec.head_dim
        self.q_proj = nn.Linear(spec.hidden, q_width, bias=spec.qkv_bias)
        self.k_proj = nn.Linear(spec.hidden, kv_width, bias=spec.qkv_bias)
        self.v_proj = nn.Linear(spec.hidden, kv_width, bias=spec.qkv_bias)
        self.o_proj = nn.Linear(q_width, spec.hidden, bias=spec.out_bias)
        if spec.qk_norm:  # OLMoE normalizes the whole projection, before the head split
            self.q_norm = RMSNorm(q_width, spec.norm_eps)
            self.k_norm = RMSNorm(kv_width, spec.norm_eps)

    def forward(self, x, cache: KVCache, rope, mask):
        b, t, _ = x.shape
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        if self.spec.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q = q.view(b, t, -1, self.spec.head_dim).transpose(1, 2)
        k = k.view(b, t, -1, self.spec.head_dim).transpose(1, 2)
        v = v.view(b, t, -1, self.spec.head_dim).transpose(1, 2)
        if rope is not None:
            q, k = apply_rope(q, k, *rope)
        k, v = cache.update(self.layer_idx, k, v)
        n_rep = self.spec.heads // self.spec.kv_heads
        out = sdpa(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))


def sdpa(q, k, v, mask):
    """``mask`` is a BoolTensor (True = may attend), ``"causal"`` or None."""
    if isinstance(mask, str):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class FusedQKVAttention(Attention):
    """GPT-2: one ``c_attn`` projection split into q, k, v; ``c_proj`` out."""

    def __init__(self, spec: ModelSpec, layer_idx: int) -> None:
        nn.Module.__init__(self)
        self.spec, self.layer_idx = spec, layer_idx
        self.c_attn = nn.Linear(spec.hidden, 3 * spec.heads * spec.head_dim, bias=spec.qkv_bias)
        self.c_proj = nn.Linear(spec.heads * spec.head_dim, spec.hidden, bias=spec.out_bias)

    def forward(self, x, cache: KVCache, rope, mask):
        b, t, _ = x.shape
        q, k, v = self.c_attn(x).split(self.spec.heads * self.spec.head_dim, dim=2)
        q = q.view(b, t, self.spec.heads, self.spec.head_dim).transpose(1, 2)
        k = k.view(b, t, self.spec.heads, self.spec.head_dim).transpose(1, 2)
        v = v.view(b, t, self.spec.heads, self.spec.head_dim).transpose(1, 2)
        k, v = cache.update(self.layer_idx, k, v)
        out = sdpa(q, k, v, mask)
        return self.c_proj(out.transpose(1, 2).reshape(b, t, -1))


class SwiGLU(nn.Module):
    """LlamaMLP: ``down(silu(gate(x)) * up(x))``; also each MoE expert."""

    def __init__(self, hidden: int, width: int, bias: bool = False) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, width, bias=bias)
        self.up_proj = nn.Linear(hidden, width, bias=bias)
        self.down_proj = nn.Linear(width, hidden, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class GeluMLP(nn.Module):
    """GPT2MLP: ``c_proj(gelu_new(c_fc(x)))`` (tanh approximation)."""

    def __init__(self, hidden: int, width: int, bias: bool = True) -> None:
        super().__init__()
        self.c_fc = nn.Linear(hidden, width, bias=bias)
        self.c_proj = nn.Linear(width, hidden, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))
