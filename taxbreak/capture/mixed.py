"""Mixed prefill + decode steps, batched the way a serving engine batches them.

A chunked-prefill engine (vLLM v1, SGLang) runs one forward over a flat token
list: a prefill chunk of one request plus one new token for each of k decode
requests whose K/V are already cached. Here that step is one forward of the
model contract ``logits, cache = model(input_ids[1, T], cache, position_ids, attn_mask)``
with ``T = C + k``:

    input_ids    [chunk_0 … chunk_{C−1}, tok_1 … tok_k]
    position_ids [0 … C−1,               ctx,  …, ctx]
    attn_mask    [1, 1, T, P + T]  block-diagonal, True = may attend:
                 chunk token i  → chunk tokens 0..i (causal within the chunk)
                 decode token j → request j's cached positions and itself

The cached K/V of the k decode requests (``P = k·ctx`` positions) are built by
one forward over their prompts laid end to end with a block-diagonal causal
mask, so the past layout is produced by the model itself. The decode-token
share is ``r = k/T`` (``--decode-share``). :func:`check_equivalence` verifies
that the mixed forward gives the logits of running the chunk and each decode
request on its own.
"""
from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass

import torch


@dataclass
class MixedBatch:
    """One mixed step's inputs and the prompts behind its decode requests."""

    prefill_ids: torch.Tensor  # [C] the prefill chunk
    decode_prompts: torch.Tensor  # [k, ctx] tokens already in each decode request's cache
    decode_ids: torch.Tensor  # [k] the new token of each decode request

    @property
    def prefill_tokens(self) -> int:
        return int(self.prefill_ids.shape[0])

    @property
    def decode_requests(self) -> int:
        return int(self.decode_ids.shape[0])

    @property
    def decode_context(self) -> int:
        return int(self.decode_prompts.shape[1]) if self.decode_requests else 0

    @property
    def tokens(self) -> int:
        return self.prefill_tokens + self.decode_requests

    @property
    def decode_share(self) -> float:
        return self.decode_requests / self.tokens


def split_tokens(tokens: int, decode_share: float) -> tuple[int, int]:
    """(prefill chunk C, decode requests k) for a step of ``tokens`` with share r = k/T.

    k = round(r·T); a share strictly between 0 and 1 keeps at least one token of each kind.
    """
    if tokens < 1 or not 0.0 <= decode_share <= 1.0:
        raise ValueError(f"need tokens >= 1 and 0 <= decode_share <= 1, got {tokens}, {decode_share}")
    decode = int(round(decode_share * tokens))
    if 0.0 < decode_share < 1.0 and tokens >= 2:
        decode = min(max(decode, 1), tokens - 1)
    return tokens - decode, decode


def random_batch(vocab: int, tokens: int, decode_share: float, decode_context: int, seed: int = 0) -> MixedBatch:
    """A mixed batch of random token ids (fixed seed), C + k = ``tokens``."""
    prefill, decode = split_tokens(tokens, decode_share)
    gen = torch.Generator().manual_seed(seed)
    return MixedBatch(
        prefill_ids=torch.randint(0, vocab, (prefill,), generator=gen),
        decode_prompts=torch.randint(0, vocab, (decode, decode_context), generator=gen),
        decode_ids=torch.randint(0, vocab, (decode,), generator=gen),
    )


def past_inputs(batch: MixedBatch, device: torch.device | str = "cpu"):
    """``(input_ids [1, P], position_ids [1, P], attn_mask [1, 1, P, P])`` that fill the decode requests' caches."""
    k, ctx = batch.decode_requests, batch.decode_context
    ids = batch.decode_prompts.reshape(1, k * ctx)
    positions = torch.arange(ctx).repeat(k).reshape(1, k * ctx)
    request = torch.arange(k).repeat_interleave(ctx)
    same = request[:, None] == request[None, :]
    causal = positions[0][:, None] >= positions[0][None, :]
    mask = (same & causal)[None, None]
    return ids.to(device), positions.to(device), mask.to(device)


def step_inputs(batch: MixedBatch, device: torch.device | str = "cpu"):
    """``(input_ids [1, T], position_ids [1, T], attn_mask [1, 1, T, P + T])`` of the mixed step."""
    c, k, ctx = batch.prefill_tokens, batch.decode_requests, batch.decode_context
    past, total = k * ctx, c + k
    ids = torch.cat([batch.prefill_ids, batch.decode_ids]).reshape(1, total)
    positions = torch.cat([torch.arange(c), torch.full((k,), ctx)]).reshape(1, total)
    # Owner of every key column: decode request j owns its past block and its
    # new token; the chunk (owner -1) owns its own columns only.
    key_owner = torch.cat([torch.arange(k).repeat_interleave(ctx), torch.full((c,), -1), torch.arange(k)])
    query_owner = torch.cat([torch.full((c,), -1), torch.arange(k)])
    mask = query_owner[:, None] == key_owner[None, :]
    # Causality inside the chunk: chunk query i sees chunk keys 0..i only.
    mask[:c, past : past + c] &= torch.ones(c, c, dtype=torch.bool).tril()
    return ids.to(device), positions.to(device), mask[None, None].to(device)


@torch.no_grad()
def prepare_past(model, batch: MixedBatch, device: torch.device | str = "cpu"):
    """The KV cache holding every decode request's context, or ``None`` without decode requests."""
    if batch.decode_requests == 0:
        return None
    ids, positions, mask = past_inputs(batch, device)
    _, cache = model(ids, cache=None, position_ids=positions, attn_mask=mask)
    return cache


@torch.no_grad()
def mixed_forward(model, batch: MixedBatch, past, device: torch.device | str = "cpu") -> torch.Tensor:
    """Logits ``[T, vocab]`` of one mixed step; ``past`` is copied, so it can be reused."""
    ids, positions, mask = step_inputs(batch, device)
    cache = copy.deepcopy(past) if past is not None else None
    logits, _ = model(ids, cache=cache, position_ids=positions, attn_mask=mask)
    return logits[0]


@torch.no_grad()
def separate_logits(model, batch: MixedBatch, device: torch.device | str = "cpu") -> torch.Tensor:
    """Logits ``[T, vocab]`` of the same tokens run apart: the chunk alone, then each request alone."""
    parts = []
    if batch.prefill_tokens:
        logits, _ = model(batch.prefill_ids.reshape(1, -1).to(device))
        parts.append(logits[0])
    for j in range(batch.decode_requests):  # one forward per request, as a reference
        _, cache = model(batch.decode_prompts[j].reshape(1, -1).to(device))
        logits, _ = model(batch.decode_ids[j].reshape(1, 1).to(device), cache=cache)
        parts.append(logits[0])
    return torch.cat(parts)


def check_equivalence(model, batch: MixedBatch, device: torch.device | str = "cpu", atol: float = 1e-4) -> dict:
    """Compare the mixed forward with the separate runs of its requests.

    Returns:
        ``{"max_abs_diff": float, "atol": float, "ok": bool, "tokens": T,
        "prefill_tokens": C, "decode_requests": k}``.
    """
    mixed = mixed_forward(model, batch, prepare_past(model, batch, device), device)
    apart = separate_logits(model, batch, device)
    diff = float((mixed.float() - apart.float()).abs().max()) if mixed.numel() else 0.0
    return {
        "max_abs_diff": diff, "atol": atol, "ok": diff <= atol, "tokens": batch.tokens,
        "prefill_tokens": batch.prefill_tokens, "decode_requests": batch.decode_requests,
    }


# --- capture mode -------------------------------------------------------------


@dataclass
class MixedConfig:
    """Shape of a mixed-step capture: ``tokens`` per step (C + k), decode share r, context per request."""

    decode_share: float = 0.2
    tokens: int = 128
    decode_context: int = 64

    def validate(self) -> None:
        from ..trace.errors import UsageError

        if not 0.0 <= self.decode_share <= 1.0:
            raise UsageError("usage.invalid", f"--decode-share must be in [0, 1], got {self.decode_share}")
        if self.tokens < 1 or self.decode_context < 1:
            raise UsageError("usage.invalid", "mixed tokens and decode context must be >= 1")


class _PastSnapshot:
    """Restores a KV cache to its pre-step state without copying tensors.

    ``KVCache.update`` appends with ``torch.cat`` (new tensors), so keeping the
    per-layer lists and putting them back undoes a step at no device cost and
    keeps copy kernels out of the trace. Other caches fall back to deepcopy.
    """

    def __init__(self, past) -> None:
        self.past = past
        self.lists = (list(past.keys), list(past.values)) if hasattr(past, "keys") and hasattr(past, "values") else None

    def fresh(self):
        if self.past is None:
            return None
        if self.lists is None:
            return copy.deepcopy(self.past)
        self.past.keys[:], self.past.values[:] = list(self.lists[0]), list(self.lists[1])
        return self.past


def run_mixed_steps(model, batch: MixedBatch, steps: int, device, run_marker: bool = True) -> None:
    """One run: ``steps`` mixed forwards of the same batch, each marked ``taxbreak/mixed/<i>``."""
    from . import markers

    snapshot = _PastSnapshot(prepare_past(model, batch, device))
    ids, positions, mask = step_inputs(batch, device)
    keep = batch.decode_requests + (1 if batch.prefill_tokens else 0)
    outer = markers.run() if run_marker else contextlib.nullcontext()
    with torch.inference_mode(), outer:
        for _ in range(steps):
            with markers.step("mixed"):
                # Logits only where an engine samples: the chunk's last token and each decode token.
                logits, _ = model(ids, cache=snapshot.fresh(), position_ids=positions, attn_mask=mask,
                                  logits_to_keep=keep)
                logits[0].argmax(-1)
            if str(device).startswith("cuda"):
                # Engines copy the sampled tokens to the host every step; the sync
                # sits outside the step marker so the step is the forward alone.
                torch.cuda.synchronize(device)
    snapshot.fresh()


def profile_mixed(config, mixed: MixedConfig, out_dir=None, progress=None):
    """Capture mixed steps into a run directory and analyze them (phase ``mixed``).

    ``config`` is a :class:`taxbreak.capture.runner.ProfileConfig`: its model,
    dtype, device, warmup and runs apply; ``new_tokens`` is the number of mixed
    steps per run; ``batch_size`` and ``seq_len`` are replaced by the mixed
    shape (one flattened sequence of ``mixed.tokens`` tokens).

    Returns:
        ``RunResult`` as :func:`taxbreak.capture.runner.profile` returns it; the
        manifest has a ``mixed`` block (tokens, prefill chunk C, decode
        requests k, decode context, actual decode share k/T, layout).

    Raises:
        UsageError, CaptureError: as ``profile``.
    """
    from dataclasses import replace

    from . import runner

    mixed.validate()
    cfg = replace(config, batch_size=1, seq_len=mixed.tokens).resolved()
    # the same intra-op thread count as a plain profile, so mixed and prefill/decode
    # points of one sweep are timed alike and the manifest's `threads` is true
    with runner.torch_threads(cfg.threads):
        return _profile_mixed(cfg, mixed, out_dir, progress or (lambda event: None))


def _profile_mixed(cfg, mixed: MixedConfig, out_dir, report):
    from pathlib import Path

    from . import manifest as mf
    from . import runner

    report(runner.ProgressEvent("build", 0, 1))
    model = runner.LoadedModel(cfg)
    batch = random_batch(model.spec.vocab, mixed.tokens, mixed.decode_share, mixed.decode_context, cfg.seed)
    _check_mixed_positions(model, batch)
    report(runner.ProgressEvent("build", 1, 1))
    run_dir = Path(out_dir) if out_dir else mf.default_run_dir(f"{model.name}-mixed")
    run_dir.mkdir(parents=True, exist_ok=True)
    steps = cfg.new_tokens
    for rep in range(cfg.warmup):
        runner.guard_workload(lambda: run_mixed_steps(model.module, batch, steps, cfg.device, run_marker=False))
        report(runner.ProgressEvent("warmup", rep + 1, cfg.warmup))
    base_ms = runner.guard_workload(lambda: _timed_mixed_runs(model.module, batch, steps, cfg.device,
                                                              cfg.overhead_reps))
    trace_path, traced_ms, info = _record(cfg, model, batch, steps, run_dir, report)
    manifest = mf.build_manifest(cfg, model.name, model.spec, model.parameters, trace_path, info,
                                 mf.capture_overhead(base_ms, traced_ms, steps))
    manifest.update(_mixed_block(batch, steps, base_ms, traced_ms))
    mf.write_json(run_dir / mf.MANIFEST, manifest)
    report(runner.ProgressEvent("analyze", 0, 1))
    derived = mf.write_derived(run_dir, trace_path)
    mf.finish_manifest(run_dir, manifest, derived)
    report(runner.ProgressEvent("analyze", 1, 1))
    return runner.RunResult(run_dir=run_dir, manifest=manifest, analysis=derived.analysis)


def _check_mixed_positions(model, batch: MixedBatch) -> None:
    from ..trace.errors import CaptureError

    needed = max(batch.prefill_tokens, batch.decode_context + 1)
    if model.max_positions is not None and needed > model.max_positions:
        raise CaptureError("model.invalid", f"{model.name} has {model.max_positions} positions; the mixed "
                           f"step needs {needed}", hint="lower the mixed tokens or --decode-context")


def _record(cfg, model, batch: MixedBatch, steps: int, run_dir, report):
    """Record ``cfg.runs`` runs of mixed steps in one torch.profiler trace."""
    import time

    from . import markers, runner
    from .kineto_log import profiler_session

    markers.reset_counters()
    session = profiler_session(cfg.device, record_shapes=True, with_stack=cfg.with_stack)
    traced_ms = []
    with session.profile as prof:
        for rep in range(cfg.runs):
            start = time.perf_counter_ns()
            runner.guard_workload(lambda: run_mixed_steps(model.module, batch, steps, cfg.device))
            traced_ms.append((time.perf_counter_ns() - start) / 1e6)
            report(runner.ProgressEvent("record", rep + 1, cfg.runs))
    trace_path = run_dir / "trace.json.gz"
    prof.export_chrome_trace(str(trace_path))
    info = {"tool": "torch.profiler", "activities": session.activity_names,
            "record_shapes": True, "with_stack": cfg.with_stack}
    return trace_path, traced_ms, info


def _timed_mixed_runs(model, batch: MixedBatch, steps: int, device, reps: int) -> list[float]:
    """Wall time (ms) of ``reps`` unprofiled runs: the baseline of the capture overhead."""
    import time

    times_ms = []
    for _ in range(reps):
        start = time.perf_counter_ns()
        run_mixed_steps(model, batch, steps, device, run_marker=False)
        times_ms.append((time.perf_counter_ns() - start) / 1e6)
    return times_ms


def _mixed_block(batch: MixedBatch, steps: int, base_ms: list[float], traced_ms: list[float]) -> dict:
    return {
        "phase_mode": "mixed",
        "steps_per_run": {"mixed": steps},
        "output_tokens_per_run": steps * (batch.decode_requests + (1 if batch.prefill_tokens else 0)),
        "mixed": {
            "tokens": batch.tokens, "prefill_tokens": batch.prefill_tokens,
            "decode_requests": batch.decode_requests, "decode_context": batch.decode_context,
            "decode_share": batch.decode_share, "steps_per_run": steps,
            "layout": "one flattened forward [chunk | decode tokens], block-diagonal attn_mask, "
                      "per-token position_ids (taxbreak/capture/mixed.py)",
        },
        "timings_ms": {"baseline_runs": base_ms, "recorded_runs": traced_ms},
    }
