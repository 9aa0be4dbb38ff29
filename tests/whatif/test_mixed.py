"""Mixed prefill+decode steps: masks, token split and numerical equivalence on CPU."""
from __future__ import annotations

import pytest
import torch

from taxbreak.capture.mixed import (
    MixedBatch,
    check_equivalence,
    mixed_forward,
    prepare_past,
    random_batch,
    separate_logits,
    split_tokens,
    step_inputs,
)
from taxbreak.capture.models import build_model


@pytest.mark.parametrize("tokens, share, expected", [
    (10, 0.2, (8, 2)), (10, 0.8, (2, 8)), (10, 0.0, (10, 0)), (10, 1.0, (0, 10)), (4, 0.01, (3, 1)),
])
def test_split_tokens(tokens, share, expected):
    assert split_tokens(tokens, share) == expected


def test_split_tokens_rejects_bad_share():
    with pytest.raises(ValueError):
        split_tokens(8, 1.5)


def test_step_mask_by_hand():
    # C = 2 chunk tokens, k = 2 decode requests with 1 cached position each (P = 2).
    # Key columns: [past r0, past r1, chunk0, chunk1, new r0, new r1].
    batch = MixedBatch(torch.tensor([5, 6]), torch.tensor([[7], [8]]), torch.tensor([9, 10]))
    ids, pos, mask = step_inputs(batch)
    assert ids.tolist() == [[5, 6, 9, 10]]
    assert pos.tolist() == [[0, 1, 1, 1]]
    expected = torch.tensor([
        [0, 0, 1, 0, 0, 0],  # chunk0 sees itself
        [0, 0, 1, 1, 0, 0],  # chunk1 sees chunk0 and itself
        [1, 0, 0, 0, 1, 0],  # request 0: its past and its new token
        [0, 1, 0, 0, 0, 1],  # request 1
    ], dtype=torch.bool)
    assert torch.equal(mask[0, 0], expected)
    assert batch.decode_share == 0.5


@pytest.fixture(scope="module")
def models():
    return {}


def _model(models, preset):
    if preset not in models:
        models[preset] = build_model(preset, tiny=True)
    return models[preset]


@pytest.mark.parametrize("preset, share", [
    ("llama-3.2-1b", 0.1), ("llama-3.2-1b", 0.8), ("gpt2", 0.4), ("olmoe-1b-7b", 0.4), ("qwen1.5-moe-a2.7b", 0.2),
])
def test_mixed_forward_equals_separate_runs(models, preset, share):
    model = _model(models, preset)
    batch = random_batch(model.spec.vocab, tokens=8, decode_share=share, decode_context=4, seed=3)
    result = check_equivalence(model, batch)
    assert result["ok"], result
    assert result["max_abs_diff"] < 1e-4
    assert result["decode_requests"] == split_tokens(8, share)[1]


def test_pure_prefill_and_pure_decode_batches():
    model = build_model("llama-3.2-1b", tiny=True)
    assert check_equivalence(model, random_batch(model.spec.vocab, 6, 0.0, 4))["ok"]
    assert check_equivalence(model, random_batch(model.spec.vocab, 6, 1.0, 4))["ok"]


def test_check_detects_a_wrong_mask():
    # The same flat tokens under a plain causal mask mix requests: the check must fail.
    model = build_model("llama-3.2-1b", tiny=True)
    batch = random_batch(model.spec.vocab, tokens=8, decode_share=0.5, decode_context=4, seed=1)
    past = prepare_past(model, batch)
    ids, pos, _ = step_inputs(batch)
    with torch.no_grad():
        wrong, _ = model(ids, cache=past, position_ids=pos)
    diff = (wrong[0] - separate_logits(model, batch)).abs().max()
    assert diff > 1e-3


def test_mixed_forward_leaves_past_reusable():
    model = build_model("gpt2", tiny=True)
    batch = random_batch(model.spec.vocab, tokens=6, decode_share=0.5, decode_context=3)
    past = prepare_past(model, batch)
    length = past.length
    first, second = mixed_forward(model, batch, past), mixed_forward(model, batch, past)
    assert past.length == length and torch.equal(first, second)
