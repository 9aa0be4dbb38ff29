"""Sparse MoE blocks, written as eager Hugging Face code writes them.

Router linear -> softmax (fp32) -> top-k -> (renormalize when the model does)
-> a Python loop over the experts that at least one token selected, each
gathering its tokens with ``torch.where``/indexing and scattering back with
``index_add_``. That loop is why MoE dispatches many times more kernels per
output token than a dense model (TaxBreak, arXiv 2603.12465: 8-11x); a fused
MoE kernel would hide exactly what this project measures.
Sources: transformers ``OlmoeSparseMoeBlock``, ``Qwen2MoeSparseMoeBlock``.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .layers import SwiGLU
from .spec import ModelSpec


class SparseMoE(nn.Module):
    """Top-k routed experts, plus Qwen2-MoE's sigmoid-gated shared expert."""

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        self.num_experts, self.top_k = spec.experts, spec.top_k
        self.norm_topk_prob = spec.norm_topk_prob
        self.gate = nn.Linear(spec.hidden, spec.experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(spec.hidden, spec.moe_intermediate) for _ in range(spec.experts))
        self.has_shared = spec.shared_expert_intermediate > 0
        if self.has_shared:
            self.shared_expert = SwiGLU(spec.hidden, spec.shared_expert_intermediate)
            self.shared_expert_gate = nn.Linear(spec.hidden, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, hidden = x.shape
        flat = x.view(-1, hidden)
        weights, selected = self._route(flat)
        out = torch.zeros((b * t, hidden), dtype=flat.dtype, device=flat.device)
        # one_hot -> [experts, top_k, tokens]; only experts hit by some token run
        expert_mask = F.one_hot(selected, num_classes=self.num_experts).permute(2, 1, 0)
        expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
        for expert_idx in expert_hit.flatten().tolist():  # host sync, as in HF
            slot, token = torch.where(expert_mask[expert_idx])
            state = flat[None, token].reshape(-1, hidden)
            y = self.experts[expert_idx](state) * weights[token, slot, None]
            out.index_add_(0, token, y.to(flat.dtype))
        if self.has_shared:
            shared = self.shared_expert(flat)
            out = out + F.sigmoid(self.shared_expert_gate(flat)) * shared
        return out.reshape(b, t, hidden)

    def _route(self, flat: torch.Tensor):
        logits = self.gate(flat)
        probs = F.softmax(logits, dim=1, dtype=torch.float)
        weights, selected = torch.topk(probs, self.top_k, dim=-1)
        if self.norm_topk_prob:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        return weights.to(flat.dtype), selected
