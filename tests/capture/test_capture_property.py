"""Property: any chunking of a sequence through the KV cache gives the full-forward logits."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from taxbreak.capture.models import build_model

MODELS = {name: build_model(name) for name in ("llama-3.2-1b-tiny", "olmoe-1b-7b-tiny", "gpt2-tiny")}


@st.composite
def chunkings(draw):
    total = draw(st.integers(min_value=2, max_value=12))
    cuts = sorted(draw(st.sets(st.integers(min_value=1, max_value=total - 1), max_size=4)))
    return total, [b - a for a, b in zip([0, *cuts], [*cuts, total])]


@pytest.mark.parametrize("name", sorted(MODELS))
@settings(max_examples=8, deadline=None)
@given(chunks=chunkings(), batch=st.integers(min_value=1, max_value=3), seed=st.integers(0, 2**16))
def test_any_chunking_matches_the_full_forward(name, chunks, batch, seed):
    model = MODELS[name]
    total, sizes = chunks
    ids = torch.randint(0, model.spec.vocab, (batch, total), generator=torch.Generator().manual_seed(seed))
    full, _ = model(ids)
    cache, start, parts = None, 0, []
    for size in sizes:
        logits, cache = model(ids[:, start:start + size], cache=cache)
        parts.append(logits)
        start += size
    assert cache.length == total
    torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=2e-5, rtol=1e-4)
