"""The decoder-only causal LM behind every preset.

Call contract (mixed prefill+decode steps are built on it; keep it exact)::

    logits, cache = model(input_ids, cache=None, position_ids=None, attn_mask=None)

* ``input_ids``: LongTensor ``[B, T]``.
* ``cache``: a :class:`KVCache` (per layer K/V ``[B, n_kv_heads, S, head_dim]``,
  ``.length``); ``None`` starts a new one. It is updated in place and returned.
* ``position_ids``: LongTensor ``[B, T]``; default ``cache.length + arange(T)``.
* ``attn_mask``: optional BoolTensor broadcastable to ``[B, 1, T, S_total]``
  (True = may attend) that replaces the default causal mask.
* ``logits``: ``[B, T, vocab]`` (or the last ``logits_to_keep`` positions).
"""
from __future__ import annotations

import torch
from torch import nn

from ...trace.errors import CaptureError
from .cache import KVCache
from .layers import Attention, FusedQKVAttention, GeluMLP, SwiGLU, make_norm, rope_cos_sin, rope_inv_freq
from .moe import SparseMoE
from .spec import ModelSpec


class DecoderLayer(nn.Module):
    """Pre-norm block: ``h = x + attn(norm(x)); out = h + mlp(norm(h))``."""

    def __init__(self, spec: ModelSpec, layer_idx: int) -> None:
        super().__init__()
        self.input_layernorm = make_norm(spec)
        attention = FusedQKVAttention if spec.family == "gpt2" else Attention
        self.self_attn = attention(spec, layer_idx)
        self.post_attention_layernorm = make_norm(spec)
        if spec.is_moe:
            self.mlp = SparseMoE(spec)
        elif spec.mlp == "gelu":
            self.mlp = GeluMLP(spec.hidden, spec.intermediate, bias=spec.mlp_bias)
        else:
            self.mlp = SwiGLU(spec.hidden, spec.intermediate, bias=spec.mlp_bias)

    def forward(self, x, cache, rope, mask):
        h = x + self.self_attn(self.input_layernorm(x), cache, rope, mask)
        return h + self.mlp(self.post_attention_layernorm(h))


class CausalLM(nn.Module):
    """Embeddings, decoder layers, final norm and LM head of one ModelSpec."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.spec = spec
        self.embed_tokens = nn.Embedding(spec.vocab, spec.hidden)
        if spec.positions == "learned":
            self.embed_positions = nn.Embedding(spec.max_positions, spec.hidden)
        self.layers = nn.ModuleList(DecoderLayer(spec, i) for i in range(spec.layers))
        self.norm = make_norm(spec)
        self.lm_head = nn.Linear(spec.hidden, spec.vocab, bias=False)
        self.register_buffer("inv_freq", rope_inv_freq(spec), persistent=False)
        self.tie_weights()

    def tie_weights(self) -> None:
        if self.spec.tie_embeddings:
            self.lm_head.weight = self.embed_tokens.weight

    def reset_buffers(self) -> None:
        """Recompute the rotary buffer (after ``to_empty`` left it uninitialized)."""
        self.inv_freq = rope_inv_freq(self.spec).to(self.inv_freq.device)

    def forward(self, input_ids, cache=None, position_ids=None, attn_mask=None, logits_to_keep: int = 0):
        _check_inputs(input_ids, position_ids)
        cache = KVCache(self.spec.layers) if cache is None else cache
        b, t = input_ids.shape
        past = cache.length
        if position_ids is None:
            position_ids = torch.arange(past, past + t, device=input_ids.device).unsqueeze(0).expand(b, -1)
        x = self.embed_tokens(input_ids)
        rope = None
        if self.spec.positions == "learned":
            x = x + self.embed_positions(position_ids)
        else:
            rope = rope_cos_sin(self.inv_freq, position_ids, x.dtype)
        mask = attn_mask if attn_mask is not None else default_mask(t, past, input_ids.device)
        for layer in self.layers:
            x = layer(x, cache, rope, mask)
        x = self.norm(x)
        if logits_to_keep:
            x = x[:, -logits_to_keep:, :]
        return self.lm_head(x), cache


def default_mask(t: int, past: int, device) -> torch.Tensor | str | None:
    """Causal over cache slots: query slot ``past+i`` sees key slots ``<= past+i``.

    Like HF's SDPA path it passes no mask for a single query token and
    ``is_causal`` for a prefill without cache; an explicit mask otherwise.
    """
    if t == 1:
        return None
    if past == 0:
        return "causal"
    q_slot = torch.arange(past, past + t, device=device)[:, None]
    k_slot = torch.arange(past + t, device=device)[None, :]
    return (k_slot <= q_slot)[None, None]


def _check_inputs(input_ids, position_ids) -> None:
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.dtype != torch.long:
        raise CaptureError("model.invalid", "input_ids must be a LongTensor [B, T]",
                           hint="pass token ids shaped [batch, tokens]")
    if position_ids is not None and tuple(position_ids.shape) != tuple(input_ids.shape):
        raise CaptureError("model.invalid", f"position_ids shape {tuple(position_ids.shape)} "
                           f"differs from input_ids {tuple(input_ids.shape)}", hint="pass [B, T] positions")
