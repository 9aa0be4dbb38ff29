"""--model hf:PATH with transformers installed (the optional extra taxbreak[hf])."""
from __future__ import annotations

import pytest
import torch

from taxbreak.capture.models import build_model
from taxbreak.trace.errors import CaptureError

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("hf") / "tiny-llama"
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=512,
                                      max_position_embeddings=256)
    config.save_pretrained(path)
    return path


def test_config_only_directory_gets_random_weights_and_the_same_contract(hf_dir):
    model = build_model(f"hf:{hf_dir}")
    ids = torch.randint(0, 512, (2, 6), generator=torch.Generator().manual_seed(0))
    full, _ = model(ids)
    logits, cache = model(ids[:, :4])
    assert cache.length == 4
    steps = [logits]
    for i in (4, 5):
        logits, cache = model(ids[:, i:i + 1], cache=cache)
        steps.append(logits)
    assert cache.length == 6
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-4)


def test_directory_without_config_is_invalid(tmp_path):
    with pytest.raises(CaptureError) as err:
        build_model(f"hf:{tmp_path}")
    assert err.value.code == "model.invalid"
