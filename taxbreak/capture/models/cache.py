"""The key/value cache that makes decode steps real decode steps."""
from __future__ import annotations

import torch


class KVCache:
    """Per-layer K and V tensors ``[B, n_kv_heads, S, head_dim]``.

    Grows by concatenation (as Hugging Face's ``DynamicCache`` does), so a
    decode step issues the same ``aten::cat`` per layer that eager HF code
    issues. ``length`` is the number of cached positions ``S``.
    """

    def __init__(self, num_layers: int) -> None:
        self.keys: list[torch.Tensor | None] = [None] * num_layers
        self.values: list[torch.Tensor | None] = [None] * num_layers

    @property
    def num_layers(self) -> int:
        return len(self.keys)

    @property
    def length(self) -> int:
        """Cached positions (of layer 0, which every forward updates first)."""
        first = self.keys[0] if self.keys else None
        return 0 if first is None else int(first.shape[2])

    def update(self, layer: int, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append this step's K/V of ``layer`` and return the full K/V."""
        if self.keys[layer] is None:
            self.keys[layer], self.values[layer] = key, value
        else:
            self.keys[layer] = torch.cat([self.keys[layer], key], dim=2)
            self.values[layer] = torch.cat([self.values[layer], value], dim=2)
        return self.keys[layer], self.values[layer]

    def __repr__(self) -> str:
        return f"KVCache(layers={self.num_layers}, length={self.length})"
