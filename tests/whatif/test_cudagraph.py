"""The graph-replay measurement says why it measured nothing where it cannot run."""
from __future__ import annotations

import pytest
import torch

from taxbreak.whatif.cudagraph import NO_CUDA, measure_decode_graph


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA answer")
def test_no_cuda_device_is_reported_not_faked():
    assert measure_decode_graph("llama-3.2-1b", 1, 16, tiny=True) == {"measured": False, "reason": NO_CUDA}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_graph_replay_measured_on_gpu():
    result = measure_decode_graph("llama-3.2-1b", 1, 16, tiny=True, iters=5, warmup=2)
    assert result["measured"], result
    assert result["graph_step_us"] > 0 and result["eager_step_us"] > 0
