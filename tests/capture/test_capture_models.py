"""Model presets: shapes, KV cache, cached decode == full forward, parameter counts."""
from __future__ import annotations

import pytest
import torch

from taxbreak.capture.models import (
    PRESETS, KVCache, ModelSpec, build_model, count_parameters, preset_names, resolve_spec,
)
from taxbreak.capture.models.decoder import default_mask
from taxbreak.trace.errors import CaptureError

TINY = [f"{name}-tiny" for name in sorted(PRESETS)]


def _ids(batch: int, tokens: int, vocab: int = 2048, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, tokens), generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def tiny_models() -> dict:
    return {name: build_model(name) for name in TINY}


@pytest.mark.parametrize("name", TINY)
def test_tiny_preset_runs_prefill_then_decode_and_grows_cache(tiny_models, name):
    model = tiny_models[name]
    spec = model.spec
    logits, cache = model(_ids(2, 7))
    assert logits.shape == (2, 7, spec.vocab)
    assert isinstance(cache, KVCache) and cache.length == 7
    assert cache.keys[0].shape == (2, spec.kv_heads, 7, spec.head_dim)
    logits, cache = model(_ids(2, 1, seed=2), cache=cache)
    assert logits.shape == (2, 1, spec.vocab)
    assert cache.length == 8
    assert all(k.shape[2] == 8 and v.shape[2] == 8 for k, v in zip(cache.keys, cache.values))


@pytest.mark.parametrize("name", TINY)
def test_cached_decode_equals_full_forward(tiny_models, name):
    model = tiny_models[name]
    ids = _ids(2, 10)
    full, _ = model(ids)
    logits, cache = model(ids[:, :6])
    steps = [logits]
    for i in range(6, 10):
        logits, cache = model(ids[:, i:i + 1], cache=cache)
        steps.append(logits)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("name", TINY)
def test_chunked_prefill_with_default_mask_equals_full_forward(tiny_models, name):
    model = tiny_models[name]
    ids = _ids(1, 9)
    full, _ = model(ids)
    first, cache = model(ids[:, :5])
    second, cache = model(ids[:, 5:], cache=cache)
    torch.testing.assert_close(torch.cat([first, second], dim=1), full, atol=1e-5, rtol=1e-4)


def test_explicit_mask_and_positions_match_the_defaults(tiny_models):
    model = tiny_models["llama-3.2-1b-tiny"]
    ids = _ids(1, 9)
    _, cache = model(ids[:, :5])
    default, _ = model(ids[:, 5:], cache=_clone(cache))
    mask = torch.ones(4, 9, dtype=torch.bool).tril(diagonal=5)[None, None]
    positions = torch.arange(5, 9)[None]
    explicit, _ = model(ids[:, 5:], cache=_clone(cache), position_ids=positions, attn_mask=mask)
    torch.testing.assert_close(explicit, default)


def test_attn_mask_blocks_attention():
    """A mask that hides the prefix gives the logits of the suffix alone (RoPE is relative)."""
    model = build_model("llama-3.2-1b-tiny")
    ids = _ids(1, 6)
    _, cache = model(ids[:, :3])
    only_self = torch.zeros(3, 6, dtype=torch.bool)
    only_self[:, 3:] = torch.ones(3, 3, dtype=torch.bool).tril()
    masked, _ = model(ids[:, 3:], cache=cache, attn_mask=only_self[None, None])
    alone, _ = model(ids[:, 3:])
    torch.testing.assert_close(masked, alone, atol=1e-5, rtol=1e-4)


def _clone(cache: KVCache) -> KVCache:
    copy = KVCache(cache.num_layers)
    copy.keys, copy.values = list(cache.keys), list(cache.values)
    return copy


def test_default_mask_is_causal_over_cache_slots():
    assert default_mask(1, 4, "cpu") is None
    assert default_mask(3, 0, "cpu") == "causal"
    mask = default_mask(2, 3, "cpu")[0, 0]
    assert mask.tolist() == [[True, True, True, True, False], [True, True, True, True, True]]


# Published totals: Llama-3.2 1B/3B from the safetensors metadata on Hugging Face,
# GPT-2 124M, OLMoE 6.92B (arXiv 2409.02060), Qwen1.5-MoE 14.3B (Qwen blog).
@pytest.mark.parametrize("name, published", [
    ("llama-3.2-1b", 1.236e9), ("llama-3.2-3b", 3.213e9), ("gpt2", 124e6),
    ("olmoe-1b-7b", 6.92e9), ("qwen1.5-moe-a2.7b", 14.3e9),
])
def test_full_size_parameter_counts_match_published_sizes(name, published):
    total = count_parameters(PRESETS[name])
    assert abs(total - published) / published < 0.02
    assert abs(total - PRESETS[name].published_params) / PRESETS[name].published_params < 0.02


def test_exact_parameter_counts_of_dense_presets():
    assert count_parameters("llama-3.2-1b") == 1_235_814_400
    assert count_parameters("llama-3.2-3b") == 3_212_749_824
    assert count_parameters("gpt2") == 124_439_808


def test_count_parameters_allocates_no_weights():
    # 14B parameters in fp32 would be 57 GB; on the meta device this is instant.
    assert count_parameters(PRESETS["qwen1.5-moe-a2.7b"]) > 14e9


@pytest.mark.parametrize("name", TINY)
def test_tiny_presets_keep_the_structure(name):
    full, tiny = PRESETS[name.removesuffix("-tiny")], resolve_spec(name)
    assert (tiny.family, tiny.norm, tiny.positions, tiny.qk_norm) == (full.family, full.norm, full.positions, full.qk_norm)
    assert tiny.is_moe == full.is_moe
    if full.is_moe:
        assert 1 < tiny.top_k < tiny.experts and tiny.top_k == full.top_k
        assert (tiny.shared_expert_intermediate > 0) == (full.shared_expert_intermediate > 0)
    assert resolve_spec(name.removesuffix("-tiny"), tiny=True) == tiny


def test_moe_decode_runs_exactly_top_k_experts_per_layer():
    model = build_model("olmoe-1b-7b-tiny")
    calls = []
    for layer in model.layers:
        for expert in layer.mlp.experts:
            expert.register_forward_hook(lambda *args: calls.append(1))
    _, cache = model(_ids(1, 4))
    calls.clear()
    model(_ids(1, 1), cache=cache)
    assert len(calls) == model.spec.layers * model.spec.top_k


def test_qwen_moe_has_a_gated_shared_expert():
    moe = build_model("qwen1.5-moe-a2.7b-tiny").layers[0].mlp
    assert moe.has_shared and moe.shared_expert_gate.out_features == 1


def test_overrides_change_depth_width_and_experts():
    spec = resolve_spec("olmoe-1b-7b", tiny=True, layers=3, hidden=256, experts=4)
    assert (spec.layers, spec.hidden, spec.heads, spec.experts, spec.top_k) == (3, 256, 8, 4, 4)
    llama = resolve_spec("llama-3.2-1b", hidden=1024)
    assert (llama.heads, llama.kv_heads) == (16, 4)


@pytest.mark.parametrize("kwargs", [{"layers": 0}, {"hidden": 100}, {"experts": 0}])
def test_invalid_overrides_raise_model_invalid(kwargs):
    with pytest.raises(CaptureError) as err:
        resolve_spec("olmoe-1b-7b-tiny", **kwargs)
    assert err.value.code == "model.invalid"


def test_experts_override_on_a_dense_model_is_invalid():
    with pytest.raises(CaptureError) as err:
        resolve_spec("gpt2", experts=4)
    assert err.value.code == "model.invalid"


def test_unknown_preset_lists_the_presets():
    with pytest.raises(CaptureError) as err:
        build_model("llama-9")
    assert err.value.code == "model.unknown"
    assert all(name in err.value.hint for name in preset_names())


def test_unknown_dtype_is_invalid():
    with pytest.raises(CaptureError) as err:
        build_model("gpt2-tiny", dtype="int3")
    assert err.value.code == "model.invalid"


def test_hf_path_without_transformers_raises_hf_unavailable(monkeypatch, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "transformers", None)  # import now fails
    with pytest.raises(CaptureError) as err:
        build_model(f"hf:{tmp_path}")
    assert err.value.code == "model.hf_unavailable"
    assert "taxbreak[hf]" in err.value.hint


def test_weights_are_deterministic_per_seed():
    a, b, c = (build_model("gpt2-tiny", seed=s) for s in (0, 0, 1))
    wa, wb, wc = (m.layers[0].mlp.c_fc.weight for m in (a, b, c))
    assert torch.equal(wa, wb) and not torch.equal(wa, wc)
    assert a.lm_head.weight is a.embed_tokens.weight  # GPT-2 ties its embeddings


def test_bfloat16_build_runs():
    model = build_model("qwen1.5-moe-a2.7b-tiny", dtype="bfloat16")
    logits, _ = model(_ids(1, 4))
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits.float()).all()


def test_bad_input_ids_raise_model_invalid():
    model = build_model("gpt2-tiny")
    with pytest.raises(CaptureError) as err:
        model(torch.zeros(3, dtype=torch.long))
    assert err.value.code == "model.invalid"


def test_model_spec_round_trips_through_dict():
    spec = PRESETS["qwen1.5-moe-a2.7b"]
    assert ModelSpec(**spec.as_dict()) == spec


@pytest.mark.parametrize("renormalize", [False, True])
def test_router_renormalizes_only_when_the_model_does(renormalize):
    from dataclasses import replace

    from taxbreak.capture.models.moe import SparseMoE

    spec = replace(resolve_spec("olmoe-1b-7b-tiny"), norm_topk_prob=renormalize)
    moe = SparseMoE(spec)
    torch.nn.init.normal_(moe.gate.weight, std=0.5, generator=torch.Generator().manual_seed(0))
    weights, selected = moe._route(torch.randn(5, spec.hidden, generator=torch.Generator().manual_seed(1)))
    assert selected.shape == (5, spec.top_k) and weights.shape == (5, spec.top_k)
    sums = weights.sum(-1)
    if renormalize:
        torch.testing.assert_close(sums, torch.ones(5))
    else:
        assert (sums < 1).all()  # top-8 of 16 softmax probabilities


def test_tiny_presets_of_one_family_are_different_networks():
    small, large = resolve_spec("llama-3.2-1b-tiny"), resolve_spec("llama-3.2-3b-tiny")
    assert (small.layers, small.hidden) == (2, 128)  # layers / 8, hidden / 16, floors 2 and 128
    assert (large.layers, large.hidden, large.heads, large.kv_heads) == (3, 192, 6, 2)  # GQA ratio 3 kept
    assert count_parameters(large) > count_parameters(small)
    names = [f"{name}-tiny" for name in PRESETS]
    shapes = {(resolve_spec(n).family, resolve_spec(n).layers, resolve_spec(n).hidden) for n in names}
    assert len(shapes) == len(names)


def test_profile_names_what_ran():
    from taxbreak.cli.profile import model_line

    spec = resolve_spec("llama-3.2-3b-tiny")
    manifest = {"model": spec.name, "model_config": spec.as_dict(), "parameters": count_parameters(spec),
                "device": "cpu", "dtype": "float32"}
    line = model_line(manifest)
    assert "llama-3.2-3b-tiny" in line and "tiny, CPU-size variant" in line
    assert "3 layers, hidden 192" in line and f"{count_parameters(spec):,} parameters" in line
    full = model_line({**manifest, "model": "gpt2", "model_config": PRESETS["gpt2"].as_dict()})
    assert "(full size): 12 layers, hidden 768" in full
